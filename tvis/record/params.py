"""Per-step parameter records (weight before the step, its gradient, Δw) without ever
copying the whole model.

Each parameter keeps exact values for a *region* — the whole tensor, or its leading rows —
fixed for the run by a budget of elements (``plan``: every parameter gets a few rows,
then whole tensors smallest first). Before a step, statistics of the weight and gradient
of a partly kept parameter are computed in place, and only the region and a fixed strided
sample are copied to the host; after the step the same region and sample are copied
again. The writer thread derives Δw = after - before on the region (bit-exact), its
statistics (estimated from the sample where the region is partial), and encodes the
values compactly (tvis/store/codec.py): the weight as an XOR against the previous step's
"after" (a full copy every ``KEYFRAME`` steps), Δw as the XOR of after against before, or
for ``torch.optim.SGD`` against SGD's prediction from the stored values when that is
smaller (tvis/store/predict.py: a third of the bytes),
the gradient alone, rounded to the run's mantissa bits as activations' gradients are
(tvis/store/rounding.py; statistics from its exact values): weights and Δw stay exact,
because each step's weight is the last one's "after". Peak extra memory is the budget's regions (about three copies), not
the model.
"""

from __future__ import annotations

import gc
import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch

from tvis.record import tensors
from tvis.store import codec, predict, rounding

# Elements every parameter keeps with values at least (whole rows, or the whole tensor).
FLOOR = 4096
# Elements of the evenly spread sample that estimates Δw's statistics for a partly kept
# parameter (its region alone would describe only the first rows).
SAMPLE = 1 << 14
# A weight stored as an XOR against the previous step is followed by a full copy after
# this many steps, so reading step N decodes at most this many earlier steps.
KEYFRAME = 8

# Optimizer hyper-parameters worth showing; anything else in a param group (tensors,
# callables, per-group state) is summarised by type only.
_PLAIN = (int, float, bool, str, type(None))


@dataclass
class Capture:
    """One parameter as the step found it: host copies of its kept region only."""

    p: torch.Tensor
    keep: int  # elements of the region (``numel`` when whole)
    kept: dict  # the value record's "kept"/"count" (format.py)
    before: np.ndarray
    w_stats: tuple | None = None  # (stats, hist) taken in place; None: from ``before``
    grad: np.ndarray | None = None
    g_stats: tuple | None = None
    g_digest: str | None = None
    w_digest: str | None = None  # of the whole weight before and after the step, when
    after_digest: str | None = None  # ranks are compared
    has_grad: bool = False
    sparse_grad: bool = False
    before_sample: np.ndarray | None = None
    after: np.ndarray | None = None
    after_sample: np.ndarray | None = None

    @property
    def whole(self) -> bool:
        return self.keep >= self.p.numel()


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


@dataclass
class Moved:
    """A parameter's SGD step as the prediction of its next step reads it (the momentum
    buffer it left): filled in by the writer thread once the step's values are encoded,
    with the very arrays the reader will decode."""

    step: int
    name: str
    hyper: dict
    dw: np.ndarray | None = None  # Δw as stored
    weight: np.ndarray | None = None  # nesterov only: the weight and gradient as stored
    grad: np.ndarray | None = None


@dataclass
class ParamState:
    """What the recorder keeps between steps: regions planned, and each parameter's last
    stored "after" (the base of the next step's weight delta)."""

    budget: int
    digests: bool = False  # digest every gradient (ranks compare them: tvis/record/ranks.py)
    grad_bits: int | None = None  # gradients stored to this many mantissa bits; None: exact
    planned: dict[int, int] = field(default_factory=dict)  # id(p) -> region elements
    last: dict[int, tuple[int, np.ndarray, int]] = field(default_factory=dict)
    # id(p) -> (step, after region, steps since the last full copy)
    moved: dict[int, Moved] = field(default_factory=dict)  # id(p) -> its last SGD step

    def keep_for(self, params: list[torch.Tensor]) -> None:
        """Plan the regions of parameters seen for the first time."""
        new = [p for p in params if id(p) not in self.planned]
        if new:
            left = max(self.budget - sum(self.planned.values()), 0)
            self.planned.update(plan(new, left))


def plan(params: list[torch.Tensor], budget: int) -> dict[int, int]:
    """Region sizes within ``budget`` elements: a floor of rows for every parameter, then
    whole tensors smallest first, the rest of the budget as rows of the next one."""
    floor = min(FLOOR, budget // max(2 * len(params), 1))
    keep = {id(p): _region_elems(p, floor) for p in params}
    left = budget - sum(keep.values())
    for p in sorted(params, key=lambda t: t.numel()):
        extra = p.numel() - keep[id(p)]
        if extra <= left:
            keep[id(p)] = p.numel()
            left -= extra
        else:
            keep[id(p)] = _region_elems(p, keep[id(p)] + left)
            break
    return keep


def _region_elems(p: torch.Tensor, elems: int) -> int:
    """Elements of the leading whole rows of ``p`` that fit in ``elems`` (a flat prefix
    when one row is bigger)."""
    n = p.numel()
    if n <= elems or p.dim() == 0:
        return n
    row = n // max(p.shape[0], 1)
    return (elems // row) * row if row <= elems else elems


def region(t: torch.Tensor, keep: int) -> tuple[torch.Tensor, dict]:
    """The kept part of ``t`` (a view where possible) and how it was cut."""
    n = t.numel()
    if keep >= n or t.dim() == 0:
        return t, {"kept": "all"}
    row = n // max(t.shape[0], 1)
    if keep >= row:
        rows = keep // row
        if t.is_sparse:
            return t.index_select(0, torch.arange(rows, device=t.device)), _rows(rows)
        return t[:rows], _rows(rows)
    first = t[0].to_dense() if t.is_sparse else t[0]
    return first.reshape(-1)[:keep], {"kept": "prefix", "count": keep}


def _rows(rows: int) -> dict:
    return {"kept": "rows", "count": rows}


def _sample(t: torch.Tensor) -> np.ndarray:
    """A fixed, evenly spread sample of ``t``'s elements (the same positions every step)."""
    flat = t.detach().reshape(-1)
    stride = max(1, flat.numel() // SAMPLE)
    return tensors.to_numpy(flat[::stride][:SAMPLE])


def _host(t: torch.Tensor) -> np.ndarray:
    """A host copy nobody else writes (``to_numpy`` copies unless told the tensor is owned)."""
    return tensors.to_numpy(t)


def capture(params: Iterable[torch.Tensor], state: ParamState) -> dict[int, Capture]:
    """Weights (and gradients, if any) of ``params`` before a step."""
    params = [p for p in dict.fromkeys(params) if isinstance(p, torch.Tensor)]
    state.keep_for(params)
    captures = {}
    for p in params:
        keep = state.planned[id(p)]
        w = p.detach()
        part, kept = region(w, keep)
        c = Capture(p, keep, kept, _host(part))
        if state.digests:
            c.w_digest = tensors.digest(w)
        if not c.whole:
            c.w_stats = tensors.stats(w)
            c.before_sample = _sample(w)
        capture_grad(c, state.digests)
        captures[id(p)] = c
    return captures


def capture_grad(c: Capture, digest: bool = False) -> None:
    """The gradient the step will use, as it stands now (and its digest if asked)."""
    g = c.p.grad
    c.has_grad = g is not None
    c.grad, c.g_stats, c.g_digest = None, None, None
    if g is None:
        return
    g = g.detach()
    c.sparse_grad = bool(g.is_sparse)
    part, _ = region(g, c.keep)
    c.grad = _host(part.to_dense() if part.is_sparse else part)
    if not c.whole:
        c.g_stats = tensors.stats(g)
    if digest:
        c.g_digest = tensors.digest(g)


def capture_after(captures: dict[int, Capture], digests: bool = False) -> None:
    """The same regions (and samples) once the step has changed the weights."""
    for c in captures.values():
        w = c.p.detach()
        c.after = _host(region(w, c.keep)[0])
        if digests:
            c.after_digest = tensors.digest(w)
        if not c.whole:
            c.after_sample = _sample(w)


def snapshot_optimizer(optimizer: torch.optim.Optimizer, state: ParamState) -> dict:
    """Every parameter the step may change, captured before it runs (none when the
    parameters are shards: the step is recorded without parameter records)."""
    params = optimizer_params(optimizer)
    if sharded(params):
        return {"params": {}, "groups": _groups(optimizer), "sharded": True}
    group_of = {id(p): i for i, group in enumerate(optimizer.param_groups) for p in group["params"]}
    return {"params": capture(params, state), "groups": _groups(optimizer), "group_of": group_of}


def snapshot_tensors(params: Iterable[torch.Tensor], state: ParamState) -> dict:
    """The same, for scripts without an optimizer: every parameter that has a gradient."""
    return {"params": capture([p for p in params if p.grad is not None], state), "groups": []}


def leaf_parameters() -> list[torch.Tensor]:
    """Leaf tensors that received a gradient, for scripts that train raw tensors with no
    nn.Module (one gc scan, done once). ``type(o)`` is read, never an attribute, so the
    scan touches no deprecated module attribute (``torch.distributed.reduce_op``)."""
    found = []
    for o in gc.get_objects():
        if issubclass(type(o), torch.Tensor) and o.is_leaf and o.requires_grad:
            if o.grad is not None:
                found.append(o)
    return found


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


@dataclass
class Job:
    """What the writer thread turns into one parameter's entries and encoded values."""

    capture: Capture
    name: str
    w_id: int
    u_id: int
    g_id: int | None
    keep_values: bool
    base: tuple[int, np.ndarray] | None  # (step, previous after region) for the weight
    grad_bits: int | None = None  # the gradient's stored mantissa bits (None: exact)
    hyper: dict | None = None  # SGD's hyper-parameters: Δw may be XOR-ed against its prediction
    prev: Moved | None = None  # the step before, as the prediction reads it
    moved: Moved | None = None  # this step, filled in for the next one


def build_step(step, snapshot, optimizer, names, batch_ids, state: ParamState, max_bytes):
    """The step record, its jobs for the writer thread (``settle``) and the raw bytes its
    values may take. Parameters whose values do not fit in ``max_bytes`` keep statistics
    only; the record says how many (``step.dropped``)."""
    capture_after(snapshot["params"], state.digests)
    entries: list[dict] = []
    jobs: list[Job] = []
    params: list[dict] = []
    left, raw_bytes, dropped = max_bytes, 0, 0

    def entry(kind_of: Capture, shape) -> int:
        entry_id = len(entries)
        p = kind_of.p
        entries.append(
            {
                "id": entry_id,
                **tensors.describe(p),
                "shape": list(shape),
                "requires_grad": False,
                "stats": {"numel": p.numel()},
                "hist": None,
                "batch_dim": None,
                "batch_dim_inferred": False,
                "value": None,
                "grad": None,
                "of": None,
            }
        )
        return entry_id

    for i, c in enumerate(snapshot["params"].values()):
        p = c.p
        name, module = names.get(id(p), (f"param{i}", ""))
        w_id, u_id = entry(c, p.shape), entry(c, p.shape)
        g_id = entry(c, p.shape) if c.has_grad else None
        size = c.before.nbytes * (3 if c.grad is not None else 2)
        keep_values = 0 < size <= left  # 0: nothing planned (a rank recorded light)
        base = None
        last = state.last.pop(id(p), None)
        if keep_values:
            left -= size
            raw_bytes += size
            if last is not None and last[2] + 1 < KEYFRAME and last[1].shape == c.before.shape:
                base = (last[0], last[1])
            depth = last[2] + 1 if base is not None else 0
            state.last[id(p)] = (step, c.after, depth)
        elif size:
            dropped += 1
        job = Job(c, name, w_id, u_id, g_id, keep_values, base, state.grad_bits)
        prev = state.moved.pop(id(p), None)
        if keep_values and c.has_grad and not c.sparse_grad:
            job.hyper = _sgd_hyper(optimizer, snapshot, p)
        if job.hyper is not None:
            if base is not None and prev is not None and prev.step == base[0]:
                if predict.same_rule(prev.hyper, job.hyper) and prev.hyper["lr"] != 0:
                    job.prev = prev
            job.moved = state.moved[id(p)] = Moved(step, name, job.hyper)
        jobs.append(job)
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
                "sparse_grad": c.sparse_grad,
                "kept": dict(c.kept) if keep_values else None,
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
    step_map = {"index": step, "batches": batch_ids, "optimizers": opt_info, "loss": None}
    if dropped:
        step_map["dropped"] = {"param_values": dropped, "params": len(params)}
    # A frozen parameter (requires_grad=False) handed to the optimizer is stepped over by
    # it, by design: not a parameter that should have had a gradient.
    frozen = {
        p["name"]
        for p, c in zip(params, snapshot["params"].values(), strict=True)
        if not c.p.requires_grad
    }
    no_grad = [p["name"] for p in params if p["grad"] is None and p["name"] not in frozen]
    if no_grad and optimizer:
        step_map["no_grad"] = no_grad
    record = {"step": step_map, "params": params, "tensors": entries}
    return record, jobs, raw_bytes


def _sgd_hyper(optimizer, snapshot: dict, p: torch.Tensor) -> dict | None:
    """SGD's hyper-parameters for ``p`` when its optimizer is ``torch.optim.SGD`` itself (a
    subclass may step differently) and its group was recorded in plain numbers."""
    if not optimizer or type(optimizer[1]) is not torch.optim.SGD:
        return None
    group = snapshot.get("group_of", {}).get(id(p))
    groups = snapshot.get("groups") or []
    return predict.sgd_hyper(groups[group]) if group is not None and group < len(groups) else None


def settle(record: dict, jobs: list[Job]) -> tuple[dict, int]:
    """On the writer thread: statistics, Δw, norms and the encoded values of a step.
    Returns the arrays to write (tensor id -> codec.Encoded) and how many statistics
    failed."""
    entries = record["tensors"]
    arrays: dict = {}
    failed = 0
    with torch._C.DisableTorchFunction():  # private copies: no subclass, no mode
        for job in jobs:
            try:
                failed += _settle_one(job, entries, arrays)
            except Exception:
                failed += 1
    for param in record["params"]:
        w, u = entries[param["weight"]]["stats"], entries[param["update"]]["stats"]
        g_id = param["grad"]
        w_norm, u_norm = w.get("norm", 0.0), u.get("norm", 0.0)
        param["norms"] = {
            "w": w_norm,
            "grad": entries[g_id]["stats"].get("norm") if g_id is not None else None,
            "update": u_norm,
            "ratio": (u_norm / w_norm) if w_norm and math.isfinite(w_norm) else None,
        }
        if "sampled" in u:
            param["norms"]["estimated"] = True  # Δw's norm from the sample
    return arrays, failed


def _settle_one(job: Job, entries: list[dict], arrays: dict) -> int:
    c = job.capture
    before, after = c.before, c.after
    # np.asarray: the difference of two 0-d arrays (a scalar parameter) is a numpy scalar.
    update = np.asarray(np.subtract(after, before))
    w_stats = c.w_stats or tensors.stats(torch.from_numpy(before))
    entries[job.w_id]["stats"], entries[job.w_id]["hist"] = w_stats
    if c.whole:
        u_stats = tensors.stats(torch.from_numpy(update))
    else:
        sample = np.asarray(np.subtract(c.after_sample, c.before_sample))
        u_stats = _scaled(tensors.stats(torch.from_numpy(sample)), c.p.numel())
    entries[job.u_id]["stats"], entries[job.u_id]["hist"] = u_stats
    if job.g_id is not None and c.grad is not None:
        g_stats = c.g_stats or tensors.stats(torch.from_numpy(c.grad))
        entries[job.g_id]["stats"], entries[job.g_id]["hist"] = g_stats
    if job.g_id is not None and c.g_digest is not None:
        entries[job.g_id]["digest"] = c.g_digest
    if c.w_digest is not None and c.after_digest is not None:
        entries[job.w_id]["digest"] = c.w_digest
        # Δw is never whole in memory: its digest is that of the (before, after) pair,
        # equal exactly when both are bit-identical.
        pair = hashlib.blake2b(f"{c.w_digest}{c.after_digest}".encode(), digest_size=8)
        entries[job.u_id]["digest"] = pair.hexdigest()
    if not job.keep_values:
        return 0
    w_value = {**c.kept, "codec": codec.CODEC}
    if job.base is not None:
        w_value["base"] = {"step": job.base[0], "param": job.name}
    arrays[job.w_id] = codec.encode(before, job.base[1] if job.base is not None else None)
    entries[job.w_id]["value"] = w_value
    grad = None
    if job.g_id is not None and c.grad is not None:
        grad, g_value = np.ascontiguousarray(c.grad), {**c.kept, "codec": codec.CODEC}
        if grad.dtype.byteorder == ">":
            grad = grad.astype(grad.dtype.newbyteorder("<"))
        if grad.size and rounding.rounds(grad.dtype, job.grad_bits):
            grad = rounding.round_mantissa(grad, job.grad_bits)
            g_value["bits"] = job.grad_bits
        arrays[job.g_id] = codec.encode(grad)
        entries[job.g_id]["value"] = g_value
    u_value = {**c.kept, "codec": codec.CODEC, "delta": job.w_id}
    arrays[job.u_id] = codec.encode(after, before)
    if job.hyper is not None and predict.usable(before, grad):
        _encode_predicted(job, before, after, update, grad, u_value, arrays)
    entries[job.u_id]["value"] = u_value
    return 0


def _encode_predicted(job: Job, before, after, update, grad, u_value: dict, arrays: dict) -> None:
    """Δw as the XOR of the after-weights against SGD's prediction, when that is smaller
    than the XOR against the weights before; the step is kept for the next prediction."""
    hyper, prev = job.hyper, job.prev
    assert hyper is not None
    inputs = None
    if prev is not None and prev.dw is not None and prev.dw.shape == before.shape:
        if not hyper["nesterov"] or (prev.weight is not None and prev.grad is not None):
            inputs = (prev.hyper["lr"], prev.dw, prev.weight, prev.grad)
    predicted = codec.encode(after, predict.sgd_after(before, grad, hyper, inputs))
    if predicted.nbytes < arrays[job.u_id].nbytes:
        arrays[job.u_id] = predicted
        u_value["predict"] = {"rule": predict.RULE, **hyper, "grad": job.g_id}
        if inputs is not None and prev is not None:
            u_value["predict"]["prev"] = {"step": prev.step, "param": prev.name, "lr": inputs[0]}
    if job.moved is not None:
        job.moved.dw = update
        if hyper["nesterov"]:
            job.moved.weight, job.moved.grad = before, grad


def _scaled(summary: tuple, numel: int) -> tuple:
    """Statistics of an evenly spread sample, standing for a tensor of ``numel``."""
    stats, hist = summary
    n = stats.get("numel", 0)
    if n and "norm" in stats:
        stats = {**stats, "numel": numel, "norm": stats["norm"] * math.sqrt(numel / n)}
        stats["sampled"] = n
    return stats, hist
