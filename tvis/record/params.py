"""Per-step parameter records: weight before the step, its gradient, and Δw exactly."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable

import torch

from tvis.record import tensors

# Optimizer hyper-parameters worth showing; anything else in a param group (tensors,
# callables, per-group state) is summarised by type only.
_PLAIN = (int, float, bool, str, type(None))


# Parameter classes of sharded training (FSDP2's DTensor, FSDP1's FlatParameter): each rank
# holds a shard, and any reduction over one (statistics) would be a collective.
SHARDED = frozenset({"DTensor", "FlatParameter"})

SHARDED_NOTICE = (
    "parameters are sharded (FSDP or DTensor): tvis records activations, losses and timings "
    "on each rank but not per-parameter weights, gradients or Δw, and compares no gradients."
)

SHARDED_GRADCAM_NOTICE = (
    "parameters are sharded (FSDP or DTensor): Grad-CAM is off, because its extra backward "
    "pass would run the sharding's collectives on one rank alone."
)


def sharded(params: Iterable[torch.Tensor]) -> bool:
    """Whether any parameter is a shard (its statistics would need every rank)."""
    return any(type(p).__name__ in SHARDED for p in params)


def optimizer_params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def snapshot_optimizer(optimizer: torch.optim.Optimizer) -> dict:
    """Copies of every parameter the step may change, taken before it runs (none when the
    parameters are shards: the step is recorded without parameter records)."""
    before = {}
    if sharded(optimizer_params(optimizer)):
        return {"params": before, "groups": _groups(optimizer), "sharded": True}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if isinstance(p, torch.Tensor) and id(p) not in before:
                before[id(p)] = (p, p.detach().clone(), _grad_copy(p))
    return {"params": before, "groups": _groups(optimizer)}


def snapshot_tensors(params: Iterable[torch.Tensor]) -> dict:
    """The same, for scripts without an optimizer: every parameter that has a gradient."""
    before = {}
    for p in params:
        if p.grad is not None and id(p) not in before:
            before[id(p)] = (p, p.detach().clone(), _grad_copy(p))
    return {"params": before, "groups": []}


def leaf_parameters() -> list[torch.Tensor]:
    """Leaf tensors that received a gradient, for scripts that train raw tensors with no
    nn.Module (one gc scan, done once)."""
    return [
        o
        for o in gc.get_objects()
        if isinstance(o, torch.Tensor) and o.is_leaf and o.requires_grad and o.grad is not None
    ]


def _grad_copy(p: torch.Tensor) -> torch.Tensor | None:
    # A copy, not a reference: zero_grad(set_to_none=False) and the step itself may
    # change the .grad tensor in place.
    return None if p.grad is None else p.grad.detach().clone()


def _groups(optimizer: torch.optim.Optimizer) -> list[dict]:
    groups = []
    for group in optimizer.param_groups:
        groups.append(
            {
                k: (v if isinstance(v, _PLAIN) else _plain(v))
                for k, v in group.items()
                if k != "params"
            }
            | {"n_params": len(group["params"])}
        )
    return groups


def _plain(value) -> object:
    if isinstance(value, (tuple, list)) and all(isinstance(v, _PLAIN) for v in value):
        return list(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value)
    return f"<{type(value).__name__}>"


def build_step(step, snapshot, optimizer, names, batch_ids, max_elems, max_bytes):
    """The step record, the arrays it stores (weight, grad, update per parameter) within
    ``max_bytes`` in all, and the statistics left for the writer thread (``settle``)."""
    entries: list[dict] = []
    arrays: dict = {}
    pending: list = []
    left = [max_bytes]

    def add(t: torch.Tensor) -> int:
        """An entry for ``t``, a copy tvis made: its values are stored without another
        copy, and on the CPU its statistics are computed off the training thread (device
        copies are summarized now, so none outlives the step)."""
        entry_id = len(entries)
        entry = {"id": entry_id, **tensors.describe(t), "grad": None, "of": None}
        if t.device.type == "cpu":
            entry["stats"], entry["hist"] = {"numel": t.numel()}, None
            pending.append((entry, t))  # statistics and digest on the writer thread
        else:
            entry["stats"], entry["hist"] = tensors.stats(t)
            entry["digest"] = tensors.digest(t)
        entry["batch_dim"], entry["batch_dim_inferred"] = None, False
        entry["value"] = None
        values, how = tensors.keep(t, None, 0, max_elems, max_bytes=left[0], owned=True)
        if values is not None:
            entry["value"] = how
            arrays[entry_id] = values
            left[0] -= values.nbytes
        entries.append(entry)
        return entry_id

    params = []
    for i, (p, before, grad) in enumerate(snapshot["params"].values()):
        after = p.detach()
        update = after - before
        name, module = names.get(id(p), (f"param{i}", ""))
        w_id, u_id = add(before), add(update)
        g_id = add(grad) if grad is not None else None
        params.append(
            {
                "name": name,
                "module": module,
                "shape": list(p.shape),
                "dtype": str(p.dtype).removeprefix("torch."),
                "optimizer": optimizer[0] if optimizer else None,
                "weight": w_id,
                "grad": g_id,
                "update": u_id,
                "sparse_grad": bool(grad is not None and grad.is_sparse),
                "norms": None,  # by settle, from the statistics
            }
        )
    opt_info = []
    if optimizer:
        opt_info = [
            {
                "index": optimizer[0],
                "cls": type(optimizer[1]).__name__,
                "groups": snapshot["groups"],
            }
        ]
    record = {
        "step": {"index": step, "batches": batch_ids, "optimizers": opt_info, "loss": None},
        "params": params,
        "tensors": entries,
    }
    return record, arrays, pending


def settle(record: dict, pending: list) -> int:
    """Finish a step record on the writer thread: statistics, then the norms they give.
    Returns how many statistics failed."""
    failed = tensors.fill(pending)
    for entry, t in pending:
        try:
            entry["digest"] = tensors.digest(t)
        except Exception:
            failed += 1
    entries = record["tensors"]
    for param in record["params"]:
        w_norm = entries[param["weight"]]["stats"].get("norm", 0.0)
        u_norm = entries[param["update"]]["stats"].get("norm", 0.0)
        g_id = param["grad"]
        param["norms"] = {
            "w": w_norm,
            "grad": entries[g_id]["stats"].get("norm") if g_id is not None else None,
            "update": u_norm,
            "ratio": (u_norm / w_norm) if w_norm and math.isfinite(w_norm) else None,
        }
    return failed
