"""Where a run went wrong: the first non-finite value of a batch, in forward and backward,
and the run's closing summary (non-finite loss, exploding gradients, parameters that never
received a gradient).

The training thread pays one reduction per project-line op (its sum, kept on the device:
a NaN or Inf anywhere makes the sum non-finite) and no host sync; module outputs, inputs
and gradients are judged from the statistics already computed. The writer thread, when it
settles the batch, walks these in the order they happened and names the first.
"""

from __future__ import annotations

import math

import torch

from tvis.record import tensors
from tvis.store import schema

# Line-op checks kept per batch: the origin is almost always early; a forward with more
# project-line ops than this is judged by its module outputs past it.
MAX_CHECKS = 4096

# A step whose total gradient norm exceeds the first recorded step's by this factor is
# reported as an exploding gradient.
EXPLODING = 100.0

# Call flags (and line flags) this module sets (tvis/store/schema.py FLAGS).
ORIGIN = schema.NONFINITE_ORIGIN  # the first op or module whose output was NaN/Inf
GRAD_ORIGIN = schema.NONFINITE_GRAD_ORIGIN  # the call whose backward first gave NaN/Inf


def note_op(batch, call_id: int | None, func, args: tuple, out, line: dict) -> None:
    """Queue a finiteness check of a project line's result (sum on its own device), and
    note which recorded activations the line consumed (who to blame in backward)."""
    batch.seq += 1
    if len(batch.finite_checks) >= MAX_CHECKS:
        return
    op = getattr(func, "__name__", str(func))
    consumed = [
        batch.entry_of(a) for a in args[:4] if isinstance(a, torch.Tensor) and a.requires_grad
    ]
    consumed = [c for c in consumed if c is not None]
    if consumed:
        batch.line_inputs.append((batch.seq, line, op, call_id, consumed))
    if not isinstance(out, torch.Tensor):
        return
    if not (out.is_floating_point() or out.is_complex()) or out.numel() == 0:
        return
    if tensors.not_captured(out):
        return
    wide = torch.float32 if out.dtype in (torch.float16, torch.bfloat16) else None
    # An expanded tensor is finite where its storage is: its repeats are not summed.
    total = tensors.stored(out)[0].detach().sum(dtype=wide)
    batch.finite_checks.append((batch.seq, line, op, call_id, total))


def locate(record: dict, checks: list, exits: dict, arrivals: list, line_inputs: list) -> dict:
    """The batch's ``anomalies`` map (format.py), flags set on the calls and lines named."""
    entries = record["tensors"]
    calls = record["calls"]

    def bad(tensor_id) -> bool:
        s = entries[tensor_id]["stats"] if isinstance(tensor_id, int) else {}
        return bool(s.get("nan") or s.get("inf"))

    found: dict = {}
    loss = (record.get("batch") or {}).get("loss")
    sick = (isinstance(loss, float) and not math.isfinite(loss)) or any(
        bad(a.get("tensor")) for c in calls if c["kind"] != "function" for a in c["outputs"]
    )
    # A healthy forward may hold infinities on purpose (an attention mask filled with
    # -inf before a softmax): an origin is looked for only where they escaped into a
    # module's output or the loss.
    origin = _input_origin(record, calls, bad) if sick else None
    if origin is None and sick:
        origin = _forward_origin(calls, checks, exits, entries)
    if origin is not None:
        found["nonfinite"] = origin
    elif arrivals:
        grad = _backward_origin(calls, entries, arrivals, exits, line_inputs, bad)
        if grad is not None:
            found["nonfinite_grad"] = grad
    for kind, flag in (("nonfinite", ORIGIN), ("nonfinite_grad", GRAD_ORIGIN)):
        where = found.get(kind)
        if where is None:
            continue
        if where.get("call") is not None:
            calls[where["call"]]["flags"].append(flag)
        where["path"] = _path(calls, where.get("call"))
        if where.get("kind") == "op":
            for line in record.get("lines") or []:
                if line["file"] == where["file"] and line["line"] == where["line"]:
                    line.setdefault("flags", []).append(flag)
    return found


def _input_origin(record: dict, calls: list, bad) -> dict | None:
    """The batch came in with NaN/Inf: the data, or a root call's inputs."""
    for arg in (record.get("data") or {}).get("batch") or []:
        if "tensor" in arg and bad(arg["tensor"]):
            return {"phase": "forward", "kind": "input", "op": arg["name"], "call": None}
    for call in calls:
        if call["depth"] == 0 and call["phase"] != "loss":
            for arg in call["inputs"]:
                if "tensor" in arg and bad(arg["tensor"]):
                    site = call.get("site") or [None, None]
                    return {
                        "phase": "forward",
                        "kind": "input",
                        "op": f"{arg['name']} of {call['name']}",
                        "call": call["id"],
                        "file": site[0],
                        "line": site[1],
                    }
    return None


def _forward_origin(calls: list, checks: list, exits: dict, entries: list) -> dict | None:
    """The first op or module output to hold NaN/Inf that the next one did not heal:
    a mask filled with -inf and softmaxed to finite values is not where a run broke."""
    events = []  # (seq, non-finite, origin)
    for seq, line, op, call_id, fine in _checked(checks):
        events.append((seq, not fine, {"phase": "forward", "kind": "op", "op": op,
                                       "call": call_id, "file": line["file"],
                                       "line": line["line"]}))  # fmt: skip
    for call in calls:
        if call["kind"] not in ("module", "loss") or call["id"] not in exits:
            continue
        stats = [entries[a["tensor"]]["stats"] for a in call["outputs"] if "tensor" in a]
        sick = any(s.get("nan") or s.get("inf") for s in stats)
        site = call.get("site") or [None, None]
        events.append((exits[call["id"]], sick, {"phase": "forward", "kind": "module",
                       "op": call["name"], "call": call["id"], "file": site[0],
                       "line": site[1]}))  # fmt: skip
    events.sort(key=lambda e: e[0])
    for i, (_, sick, origin) in enumerate(events):
        if sick and (i + 1 == len(events) or events[i + 1][1]):
            return origin
    return None


def _checked(checks: list) -> list:
    """Each check with whether its sum was finite."""
    if not checks:
        return []
    with torch._C.DisableTorchFunction():
        sums = torch.stack([c[4].to("cpu") if not c[4].is_complex() else c[4].abs().to("cpu")
                            for c in checks])  # fmt: skip
        fine = torch.isfinite(sums).tolist()
    return [(*c[:4], f) for c, f in zip(checks, fine, strict=True)]


def _backward_origin(
    calls: list, entries: list, arrivals: list, exits: dict, line_inputs: list, bad
) -> dict | None:
    """The first activation gradient to arrive non-finite, named by what produced it in
    backward: the first line or module call that consumed that activation in forward."""
    for _, tensor_id in sorted(arrivals):
        if not bad(entries[tensor_id].get("grad")):
            continue
        line_use = next((u for u in line_inputs if tensor_id in u[4]), None)
        module_use = next(
            (
                c
                for c in calls
                if c["kind"] in ("module", "loss")
                and any(a.get("tensor") == tensor_id for a in c["inputs"])
            ),
            None,
        )
        if line_use is not None and (
            module_use is None or line_use[0] < exits.get(module_use["id"], 1 << 62)
        ):
            _, line, op, call_id, _ = line_use
            return {"phase": "backward", "kind": "op", "op": f"backward of {op}",
                    "call": call_id, "tensor": tensor_id, "file": line["file"],
                    "line": line["line"]}  # fmt: skip
        named = module_use or next(
            (c for c in calls if any(a.get("tensor") == tensor_id for a in c["outputs"])), None
        )
        site = (named or {}).get("site") or [None, None]
        return {
            "phase": "backward",
            "kind": "grad",
            "op": f"backward of {named['name']}" if named else "backward of the loss",
            "call": named["id"] if named else None,
            "tensor": tensor_id,
            "file": site[0],
            "line": site[1],
        }
    return None


def _path(calls: list, call_id: int | None) -> str:
    names = []
    while call_id is not None and call_id >= 0:
        call = calls[call_id]
        names.append(call["cls"] and f"{call['name']} ({call['cls']})" or call["name"])
        call_id = call["parent"]
    return " › ".join(reversed(names))


def describe(origin: dict) -> str:
    """``model.py:37 log in Net.forward``-style text for one origin."""
    where = f"{origin['file']}:{origin['line']} " if origin.get("file") else ""
    what = origin.get("op") or "?"
    if origin.get("kind") == "input":
        return f"the input {what} already held NaN/Inf"
    inside = f" in {origin['path']}" if origin.get("path") else ""
    return f"{where}{what}{inside}"


def summary(loss_bad, origins: list, grad_norms: list, no_grad: dict) -> list[dict]:
    """The run's anomalies, first of each kind, as {"kind", "text", ...} maps."""
    out: list[dict] = []
    if loss_bad is not None:
        batch, step, value = loss_bad
        out.append(
            {
                "kind": "loss_nonfinite",
                "batch": batch,
                "step": step,
                "text": f"loss became {value} at step {step} (batch {batch})",
            }
        )
    for kind, label in (
        ("nonfinite", "first non-finite value"),
        ("nonfinite_grad", "first non-finite gradient"),
    ):
        first = next(
            ((b, o[kind]) for b, o in sorted(origins, key=lambda x: x[0]) if kind in o), None
        )
        if first is not None:
            batch, origin = first
            out.append(
                {
                    "kind": kind,
                    "batch": batch,
                    "origin": origin,
                    "text": f"{label}: {describe(origin)} (batch {batch})",
                }
            )
    if grad_norms:
        bad = _first_bad_norm(sorted(grad_norms))
        if bad is not None:
            out.append({"kind": "exploding_grad", "step": bad[0], "text": bad[1]})
    if no_grad:
        names = sorted(no_grad)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        out.append(
            {
                "kind": "no_grad",
                "params": names,
                "text": f"{len(names)} parameter(s) never received a gradient: {shown}",
            }
        )
    return out


def _first_bad_norm(steps: list[tuple[int, float]]) -> tuple[int, str] | None:
    """The first step whose total gradient norm is non-finite or EXPLODING times the first
    step's, with a sentence saying so; None when every step is healthy."""
    first_step, first_norm = steps[0]
    if not math.isfinite(first_norm):
        return (
            first_step,
            f"gradient norm was non-finite from step {first_step} on: {first_norm:.3g}",
        )
    for step, norm in steps[1:]:
        if not math.isfinite(norm) or (first_norm > 0 and norm > EXPLODING * first_norm):
            how = "became non-finite" if not math.isfinite(norm) else "exploded"
            return step, (
                f"gradient norm {how} at step {step}: {norm:.3g} "
                f"(step {first_step}: {first_norm:.3g})"
            )
    return None
