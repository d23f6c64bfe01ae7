"""The loss is whatever the backward ran on, found from that scalar back to what made it.

``torch.nn.functional``'s losses are analysed where they are called (loss.py). A loss of
the script's own — a class outside ``torch.nn`` (timm's ``LabelSmoothingCrossEntropy``), a
project function, or an inline ``(pred - y).pow(2).mean()`` — is found at backward: from
the scalar backward runs on, a few autograd steps back (through a scale such as gradient
accumulation's ``loss / n``, or a sum of terms), to the nearest scalar the batch noted (a
module's or project function's return, a full ``mean``/``sum`` reduction on a project
line). Its per-sample losses are had exactly or not at all:

- a reduction's input holds each sample's elements: their mean (or sum) per sample;
- a call is re-applied to each sample alone (its batch-sized tensors sliced), under
  ``no_grad``, with tvis unobserving and training's RNG state restored after, and kept
  only when the mean (or sum) of those values gives back the batch's loss.

Otherwise the section says why (``per_sample_why``).
"""

from __future__ import annotations

import inspect
import linecache
import math
import warnings

import torch

from tvis.record import gradcam, seq_first, vocabulary
from tvis.record.builder import Call

# Samples a loss call is re-applied to (in one vmapped call, or one call per sample when
# the loss cannot be vmapped): a batch bigger than this is one whose per-sample losses a
# person reads a few of, not all, and the loop would cost more than the step.
MAX_REAPPLIED = 1024

# How far the mean (or sum) of the re-applied values may lie from the batch's loss, as a
# fraction of it: float32 sums in another order differ by a few ulps, a wrong split by far more.
TOLERANCE = 1e-4

# Losses between two distributions (distillation's soft term): no target class to decode,
# so they are named as terms of the loss (with their weight), and describe it only when
# no other term does.
DIVERGENCES = ("kl_div",)

# What a loss analysed where it was called says of the batch's predictions, taken over by
# the loss that wraps it (a function of the script's own, a masked reduction of its values).
DESCRIBING = (
    "classes",
    "contrastive",
    "target",
    "pred",
    "p_target",
    "top_i",
    "top_p",
    "shape",
    "soft_target",
    "target_top_i",
    "target_top_p",
    "target_floor",
)

# Full reductions whose input is a loss per element.
REDUCTIONS = ("mean", "sum")


def note_scalar(batch, result, made_by) -> None:
    """Remember a scalar that may become the loss: ``made_by`` is ``("call", call, fn,
    args, kwargs)`` or ``("op", name, input, (file, line))``. A call that returns its
    losses in a dict, tuple or list (open_clip's ``output_dict=True``, a model returning
    ``(logits, loss)``) has each scalar noted, ``fn`` then picking that one out."""
    if batch.light:
        return
    if isinstance(result, torch.Tensor):
        if result.requires_grad and result.numel() == 1:
            batch.scalars[id(result)] = (result, made_by)
        return
    if made_by[0] != "call" or not isinstance(result, (dict, list, tuple)):
        return
    items = result.items() if isinstance(result, dict) else enumerate(result)
    for key, value in list(items)[:MAX_RETURNED]:
        if isinstance(value, torch.Tensor) and value.requires_grad and value.numel() == 1:
            fn = made_by[2] and _picking(made_by[2], key)
            batch.scalars[id(value)] = (value, (*made_by[:2], fn, *made_by[3:]))


# Values of a returned dict, tuple or list looked at for scalars: a loss dict holds a few.
MAX_RETURNED = 16


def _picking(fn, key):
    """``fn`` returning only its result's ``key`` entry (for re-applying it per sample)."""

    def picked(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out[key] if isinstance(out, (dict, list, tuple)) else out

    return picked


def find(rec, batch, loss: torch.Tensor) -> None:
    """Make ``batch.sections["loss"]`` describe what backward runs on, when the loss
    analysed at a functional loss is not it (or there was none); a loss summed from
    several terms (a multi-task dict of losses, distillation's soft and hard terms) is
    described by its first term, and the section lists every term with its weight."""
    section = analysed = batch.sections.get("loss")
    if section is not None and batch.loss_tensor is loss:
        return
    found, linear = _producers(batch, loss)
    if not found:
        if section is None:
            batch.sections["loss"] = _unknown(batch, loss)
        return
    found.sort(key=lambda term: _call_order(term[1], section))
    made, made_by = found[0]
    hand = _hand_mask(batch, loss) if analysed is not None else None
    if made_by is None:
        pass  # the functional loss analysed, scaled or summed with other terms
    elif made_by[0] == "op" and section is not None and made_by[2] is batch.loss_tensor:
        # loss(..., reduction="none").mean(): the loss analysed, reduced on the script's line
        section.update(value=float(made.detach()), reduction=made_by[1])
    else:
        if made_by[0] == "op":
            masked = hand is not None and made_by[2].numel() == hand.numel()
            section = _from_reduction(rec, batch, made, *made_by[1:], masked=masked)
            if masked and analysed is not None:
                # (loss * mask).sum(): the analysed loss's values, masked, describe it
                section.update({k: analysed[k] for k in DESCRIBING if k in analysed})
        else:
            section = _from_call(rec, batch, made, *made_by[1:], inner=section)
        batch.sections["loss"] = section
        vocabulary.settle(rec, section.get("classes"))
    if section is not None and not (len(found) == 1 and made is loss):
        section.update(_terms(rec, batch, loss, found, linear, analysed))
    if section is not None and analysed is not None and hand is not None:
        # padding a hand-written mask zeroed: not tokens of the batch
        section["valid"] = analysed["valid"] = batch.derived(_valid(batch, analysed, hand))


def _valid(batch, analysed: dict, mask: torch.Tensor) -> torch.Tensor:
    """The analysed loss's positions that count: kept by the hand mask and not ignored
    (``ignore_index``), sample by sample as its stored values are."""
    order = seq_first.sample_order(batch, mask.numel())
    if analysed.get("time_major") and order is not None:
        mask = mask[order.to(mask.device)]
    if batch.loss_valid is not None and batch.loss_valid.shape == mask.shape:
        mask = mask & batch.loss_valid.to(mask.device)
    return mask


def _hand_mask(batch, loss: torch.Tensor) -> torch.Tensor | None:
    """The 0/1 mask a script multiplied into the analysed loss's per-element values before
    reducing them (``(loss * mask).sum() / mask.sum()``), found a few autograd steps back
    from backward's scalar, as a flat bool tensor in the order of those values; None if
    there is none."""
    made = batch.loss_tensor
    if made is None or made.grad_fn is None or made.dim() == 0:
        return None
    frontier, seen = [loss.grad_fn], set()
    for _ in range(WALK_STEPS + 2):
        ahead = []
        for node in frontier:
            if node is None or node in seen:
                continue
            seen.add(node)
            path = _shape_path(node, made.grad_fn) if node.name() == "MulBackward0" else None
            if path is not None:
                for saved in ("_saved_self", "_saved_other"):
                    mask = getattr(node, saved, None)
                    if (
                        isinstance(mask, torch.Tensor)
                        and not mask.requires_grad
                        and mask.numel() == made.numel()
                        and bool(((mask == 0) | (mask == 1)).all())
                    ):
                        if sum(n in TRANSPOSES for n in path) % 2 and mask.dim() == 2:
                            mask = mask.t()  # laid out as the values were before the .t()
                        return mask.detach().reshape(-1) != 0
            ahead += [n for n, _ in node.next_functions if n is not None]
        frontier = ahead
    return None


# Shape-only steps between the analysed loss's values and the product with a mask.
RESHAPES = ("ViewBackward0", "ReshapeAliasBackward0", "UnsafeViewBackward0")
TRANSPOSES = ("TBackward0", "TransposeBackward0")


def _shape_path(node, target) -> list[str] | None:
    """The names of the shape-only steps (a view, a reshape, a transpose) by which
    ``node``'s input is ``target``; None when it is not so."""
    path: list[str] = []
    for _ in range(3):
        inputs = [n for n, _ in node.next_functions if n is not None]
        if target in inputs:
            return path
        shaped = [n for n in inputs if n.name() in (*RESHAPES, *TRANSPOSES)]
        if not shaped:
            return None
        node = shaped[0]
        path.append(node.name())
    return None


# Autograd steps walked back from the scalar backward ran on to the calls that made it: a
# scale (gradient accumulation's ``loss / n``) or a weighted sum of terms is a few ops,
# and the walk must not wander into the model.
WALK_STEPS = 3

# Autograd nodes through which the scalar backward ran on is a weighted sum of the terms
# found (a product or quotient is linear only while one side is a constant).
LINEAR_NODES = {
    "AddBackward0",
    "AddBackward1",
    "SubBackward0",
    "SubBackward1",
    "RsubBackward0",
    "RsubBackward1",
    "MulBackward0",
    "MulBackward1",
    "DivBackward0",
    "DivBackward1",
    "NegBackward0",
    "CloneBackward0",
    "ToCopyBackward0",
    "SumBackward0",
    "MeanBackward0",
    "StackBackward0",
    "CatBackward0",
    "ViewBackward0",
    "SqueezeBackward0",
    "UnsqueezeBackward0",
}
ONE_SIDED = {"MulBackward0", "DivBackward0"}


def _producers(batch, loss: torch.Tensor) -> tuple[list, bool]:
    """The scalars nearest to ``loss`` in its graph, each (scalar, what made it; None for
    the functional loss analysed): ``loss`` itself, or the terms a few ops before it; and
    whether ``loss`` is a weighted sum of them (the ops between are linear)."""
    noted = {}
    steps = _model_running_calls(batch)
    for t, made_by in batch.scalars.values():
        if t.grad_fn is not None and not (made_by[0] == "call" and made_by[1].id in steps):
            noted.setdefault(t.grad_fn, (t, made_by))
    if batch.loss_tensor is not None and batch.loss_tensor.grad_fn is not None:
        noted[batch.loss_tensor.grad_fn] = (batch.loss_tensor, None)
    found: list = []
    linear = True
    frontier, seen = [loss.grad_fn], set()
    for _ in range(WALK_STEPS + 1):
        ahead = []
        for node in frontier:
            if node is None or node in seen:
                continue
            seen.add(node)
            if node in noted:
                found.append(noted[node])
                continue  # a term: what made it is not walked into
            inputs = [n for n, _ in node.next_functions if n is not None]
            name = node.name()
            if name not in LINEAR_NODES or (name in ONE_SIDED and len(inputs) > 1):
                linear = False
            ahead += inputs
        frontier = ahead
    return found, linear


def _model_running_calls(batch) -> set[int]:
    """Project functions that ran a module other than a loss (a Lightning-style
    ``training_step``, a ``compute_loss(model, batch)``): what they return is the loss
    of a whole step, and the loss terms are looked for inside it."""
    by_id = {c.id: c for c in batch.calls}
    out: set[int] = set()
    for c in batch.calls:
        if c.kind != "module":
            continue
        parent = by_id.get(c.parent)
        while parent is not None and parent.id not in out:
            if parent.kind == "function":
                out.add(parent.id)
            parent = by_id.get(parent.parent)
    return out


def _call_order(made_by, section: dict | None) -> tuple[bool, float]:
    """Where a term's call stands in the batch's call order (divergences, then inline
    reductions last)."""
    if made_by is None:
        call = (section or {}).get("call")
        return False, call if isinstance(call, int) else math.inf
    if made_by[0] != "call":
        return False, math.inf
    fn = made_by[2]
    divergence = isinstance(fn, torch.nn.KLDivLoss) or getattr(fn, "__name__", "") in DIVERGENCES
    return divergence, made_by[1].id


def _terms(rec, batch, loss: torch.Tensor, found: list, linear: bool, analysed) -> dict:
    """``terms``: each loss term backward's scalar was made from, with its value and (when
    the scalar is a weighted sum of them) its weight, d(scalar)/d(term); ``rest``: what
    the weighted terms leave of the scalar (terms tvis saw no loss call make).
    ``analysed``: the section of the functional loss analysed where it was called."""
    terms = []
    for t, made_by in found:
        if made_by is None:
            call_id = (analysed or {}).get("call")
            call = next((c for c in batch.calls if c.id == call_id), None)
            name = (call.cls or call.name) if call is not None else (analysed or {}).get("fn")
        elif made_by[0] == "call":
            call_id, name = made_by[1].id, made_by[1].cls or made_by[1].name
        else:
            call_id, name = None, _expression(made_by[3]) or f".{made_by[1]}()"
        terms.append({"call": call_id, "fn": name, "value": float(t.detach())})
    if not linear:
        return {"terms": terms, "rest": None}
    paused = rec.paused
    rec.paused = True  # tvis's own gradient hooks stay silent
    try:
        with rec.quiet():
            grads = torch.autograd.grad(
                loss, [t for t, _ in found], retain_graph=True, allow_unused=True
            )
    except Exception:
        return {"terms": terms, "rest": None}
    finally:
        rec.paused = paused
    scale = batch.grad_scale or 1.0  # backward ran on a GradScaler's multiple of the loss
    for term, grad in zip(terms, grads, strict=True):
        term["weight"] = float(grad) / scale if grad is not None else 0.0
    rest = float(loss.detach()) / scale - math.fsum(t["weight"] * t["value"] for t in terms)
    return {"terms": terms, "rest": rest}


def _unknown(batch, loss: torch.Tensor) -> dict:
    fn = getattr(loss.grad_fn, "name", lambda: "an op")()
    return {
        "call": None,
        "fn": None,
        "value": float(loss.detach()),
        "per_sample_why": (
            f"backward ran on a scalar made by {fn}, not by a loss call or a reduction on a "
            "line of the script that tvis saw, so per-sample losses are not known."
        ),
    }


# -- an inline reduction -----------------------------------------------------------------


def _from_reduction(rec, batch, loss, op: str, per_element, line, masked: bool = False) -> dict:
    """The section of a loss reduced on a line of the script. ``masked``: the reduced
    tensor is the analysed loss's values times a hand mask, flattened ``[B*T]`` sample by
    sample as that loss's are when not time-major, so it splits into the samples' rows."""
    call = _loss_call(rec, batch, _expression(line) or f".{op}()", line, per_element, loss)
    section: dict = {
        "call": call.id,
        "fn": op,
        "reduction": op,
        "value": float(loss.detach()),
        "per_sample_how": f"each sample's elements of the tensor .{op}() reduced",
    }
    b = batch.batch_size
    with torch.no_grad():
        elements = per_element.detach().float()
        elements, reordered = _sample_major(batch, elements)
        if reordered:
            section["time_major"] = True  # per_element stored sample by sample
        section["per_element"] = batch.derived(elements.reshape(-1))
        if masked and b and elements.dim() == 1 and elements.numel() % b == 0:
            elements, section["merged"] = elements.reshape(b, -1), True
        if not b or elements.dim() == 0 or elements.numel() % b or elements.shape[0] != b:
            section["per_sample_why"] = (
                f"the reduced tensor {list(elements.shape)} has no batch dimension of "
                f"{b}, so its elements cannot be split by sample."
            )
            return section
        rows = elements.reshape(b, -1)
        per_sample = rows.mean(1) if op == "mean" else rows.sum(1)
    section["per_sample"] = per_sample.tolist()
    section.setdefault("merged", False)
    return section


def _sample_major(batch, elements: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """``elements`` of a sequence-first batch with its samples first (``[T, B, ...]``
    transposed, time-major ``[T*B, ...]`` rows gathered sample by sample), and whether
    they were reordered so."""
    steps, b = batch.seq_len, batch.batch_size
    if steps is None or elements.dim() == 0:
        return elements, False
    if elements.dim() >= 2 and elements.shape[:2] == (steps, b):
        return elements.transpose(0, 1), True
    order = seq_first.sample_order(batch, elements.shape[0])
    if order is None:
        return elements, False
    rows = elements[order.to(elements.device)]
    return rows.view(b, steps, *elements.shape[1:]), True


def _expression(line) -> str | None:
    """The reduced expression as the line writes it (``(pred - y).pow(2).mean()``)."""
    if not line:
        return None
    text = linecache.getline(line[0], line[1]).strip()
    if "=" in text and "==" not in text.split("=", 1)[0]:
        text = text.split("=", 1)[1].strip()
    return text[:80] or None


def _loss_call(rec, batch, name: str, line, given, loss) -> Call:
    """A call of kind ``loss`` for an inline expression, so Replay has a loss step."""
    call = Call(
        id=0,
        parent=-1,
        depth=0,
        kind="loss",
        name=name,
        cls=None,
        phase="loss",
        definition=None,
        site=rec.project.where(*line) if line else None,
        t0=(rec.work.started - rec.overhead - batch.started) * 1e3,
        no_grad=False,
    )
    rec.open_call(batch, call)
    rec.stack.pop()
    call.fwd_ms = 0.0
    call.inputs = batch.args([("input", given)], True)
    call.outputs = batch.args([("out", loss)], True)
    rec.watch_gradients(batch, call)
    return call


# -- a call of the script's own ------------------------------------------------------------


def _from_call(rec, batch, loss, call: Call, fn, args, kwargs, inner: dict | None) -> dict:
    _mark_loss(batch, call)
    name = call.cls or call.name
    section: dict = {
        "call": call.id,
        "fn": name,
        "value": float(loss.detach()),
    }
    logits, target = _logits_and_target(args, kwargs)
    if inner is not None and _inside(batch, inner.get("call"), call):
        # a functional loss inside it: its predictions describe the same batch (one beside
        # it, another term of a multi-task loss, predicts something else)
        for key in DESCRIBING:
            if key in inner:
                section[key] = inner[key]
    elif logits is not None:
        from tvis.record.loss import _decode

        section.update(_decode(batch, logits, target, "cross_entropy", None))
    else:
        from tvis.record.loss import decode_soft

        scores = _tensors(args, kwargs)
        if len(scores) >= 2:  # timm's SoftTargetCrossEntropy(x, mixed one-hot targets)
            section.update(decode_soft(batch, scores[0], scores[1]))
    per_sample, how = _reapplied(rec, batch, fn, args, kwargs, float(loss.detach()))
    if per_sample is None:
        section["per_sample_why"] = how
    else:
        section["per_sample"] = per_sample
        section["reduction"] = how
        section["per_sample_how"] = f"{name} re-applied to each sample alone"
        section["merged"] = False
    if getattr(fn, "__name__", "") in DIVERGENCES:
        section.update(_divergence_elements(rec, batch, fn, args, kwargs))
    if (
        rec.settings.gradcam
        and logits is not None
        and logits.dim() == 2
        and not section.get("contrastive")
    ):
        cams = gradcam.compute(rec, batch, logits, target)
        if cams:
            batch.sections["gradcam"] = cams
    return section


def _divergence_elements(rec, batch, fn, args, kwargs) -> dict:
    """``F.kl_div`` as the loss: the reduction the script asked for (``batchmean``: the
    sum over every element ÷ the batch size, so each sample's loss is its KL summed over
    its classes) and the per-element values, recomputed unreduced."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return {}
    bound.apply_defaults()
    params = dict(bound.arguments)
    paused = rec.paused
    rec.paused = True
    try:
        with rec.quiet(), torch.no_grad():
            elements = fn(**{**params, "reduction": "none"})
    except Exception:
        return {}
    finally:
        rec.paused = paused
    out: dict = {"per_element": batch.derived(elements.detach().float())}
    if params.get("reduction") == "batchmean":
        out["reduction"] = "batchmean"
        out["per_sample_how"] = "each sample's KL summed over its classes (batchmean: ÷ B)"
    return out


def _inside(batch, call_id, outer: Call) -> bool:
    """Whether call ``call_id`` ran inside ``outer``."""
    parents = {c.id: c.parent for c in batch.calls}
    while isinstance(call_id, int) and call_id >= 0:
        if call_id == outer.id:
            return True
        call_id = parents.get(call_id)
    return False


def _mark_loss(batch, call: Call) -> None:
    """The call (and what ran inside it) is the loss step, not the forward."""
    if call.depth == 0 and call.phase != "loss" and call.fwd_ms:
        batch.phase_ms["forward"] = batch.phase_ms.get("forward", 0) - call.fwd_ms
        batch.phase_ms["loss"] = batch.phase_ms.get("loss", 0) + call.fwd_ms
    call.kind = "loss"
    inside = {call.id}
    for c in batch.calls[call.id :]:
        if c.id in inside or c.parent in inside:
            inside.add(c.id)
            c.phase = "loss"


def _logits_and_target(args, kwargs):
    """The (scores [B, C], class ids [B]) a classification loss was given, if it was."""
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    if len(tensors) < 2:
        return None, None
    logits, target = tensors[0], tensors[1]
    if (
        logits.is_floating_point()
        and logits.dim() == 2
        and target.dim() == 1
        and not target.is_floating_point()
        and target.shape[0] == logits.shape[0]
    ):
        return logits, target
    return None, None


def _reapplied(rec, batch, fn, args, kwargs, value: float):
    """(per-sample losses, "mean" | "sum") from ``fn`` applied to each sample alone, or
    (None, why not)."""
    b = batch.batch_size
    if fn is None:
        return None, "tvis could not find the function that made the loss to re-apply it."
    if any(isinstance(a, torch.nn.Module) for a in (*args, *kwargs.values())):
        return None, (
            "the loss was made by a function that runs a model; re-applying it per sample "
            "would run the model again, so per-sample losses are not known."
        )
    sliced = [_batched(a, b) for a in (*args, *kwargs.values())]
    if not b or b > MAX_REAPPLIED or not any(sliced):
        return None, (
            f"no argument of the loss has the batch's {b} samples in its first dimension"
            if not any(sliced)
            else f"the batch has {b} samples, more than the {MAX_REAPPLIED} tvis re-applies the loss to"
        )
    devices = sorted({a.device.index or 0 for a in _tensors(args, kwargs) if a.is_cuda})
    paused = rec.paused
    rec.paused = True
    try:
        with rec.quiet(), torch.no_grad(), torch.random.fork_rng(devices=devices):
            values = _each_sample(fn, args, kwargs, b)
    except Exception as e:
        return None, f"the loss could not be applied to one sample ({type(e).__name__}: {e})."
    finally:
        rec.paused = paused
    if values is None:
        return None, "the loss applied to one sample does not give one value."
    for reduction, total in (("mean", math.fsum(values) / b), ("sum", math.fsum(values))):
        if abs(total - value) <= TOLERANCE * max(1.0, abs(value)):
            return values, reduction
    return None, _not_split(values, value)


def _not_split(values: list[float], value: float) -> str:
    """Why values of the loss re-applied to each sample alone are not its per-sample
    losses, in words: a contrastive loss gives every lone sample the same value (0: its
    only pair is itself), which says nothing of the sample."""
    if max(values) - min(values) <= TOLERANCE * max(1.0, abs(values[0])):
        return (
            f"the loss of one sample alone is {values[0]:.4g} whatever the sample, not a part "
            f"of the batch's {value:.4g}: each sample's loss depends on the other samples in "
            "its batch (as a contrastive loss's does), so it does not split by sample."
        )
    mean = math.fsum(values) / len(values)
    return (
        f"the losses of each sample alone average {mean:.4g} (sum {math.fsum(values):.4g}), "
        f"not the batch's {value:.4g}: each sample's loss depends on the rest of its batch, "
        "so it does not split by sample."
    )


def _each_sample(fn, args, kwargs, b: int) -> list[float] | None:
    """``fn`` of each sample alone (its batch-sized arguments cut to that sample): in one
    vmapped call where the loss allows it, else one call per sample."""
    flat, names = [*args, *kwargs.values()], list(kwargs)
    dims = tuple(0 if _batched(a, b) else None for a in flat)

    def one(*values):
        values = [v.unsqueeze(0) if d == 0 else v for v, d in zip(values, dims, strict=True)]
        return fn(*values[: len(args)], **dict(zip(names, values[len(args) :], strict=True)))

    try:
        with warnings.catch_warnings():
            # torch's "no batching rule for aten::kl_div" is tvis's business, not the script's
            warnings.simplefilter("ignore", UserWarning)
            out = torch.func.vmap(one, in_dims=dims)(*flat)
        if isinstance(out, torch.Tensor) and tuple(out.shape) == (b,):
            return out.double().tolist()
    except Exception:
        pass  # .item(), randomness or data-dependent control flow: one sample at a time
    values = []
    for i in range(b):
        value = fn(
            *(_sample(a, i, b) for a in args), **{k: _sample(v, i, b) for k, v in kwargs.items()}
        )
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            return None
        values.append(float(value))
    return values


def _tensors(args, kwargs):
    return [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]


def _batched(a, b) -> bool:
    return isinstance(a, torch.Tensor) and a.dim() > 0 and a.shape[0] == b


def _sample(a, i: int, b: int):
    return a[i : i + 1] if _batched(a, b) else a
