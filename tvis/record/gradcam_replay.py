"""The kept samples' forward run again alone, for Grad-CAM at k/B of a backward's cost.

Grad-CAM's gradients from the training graph are the whole batch's backward (BatchNorm in
training mode ties every sample to every other), so each pass costs about a backward of
the batch. Here the model's root call is run again on the first ``k`` samples, with each
BatchNorm that normalises with batch statistics frozen at the statistics of the whole
batch (saved by its autograd node, or read from its recorded input), which gives the same
scores for those samples within float rounding and a graph ``k/B`` the size. A replay
runs user code a second time, so it is refused where it could be seen, and undone where
it can be:

- stood in for: each dropout module applies the masks it drew for those samples in the
  batch (read off its recorded input and output);
- refused up front: module hooks or parametrizations of the script's own (they would run
  again), alpha dropout, SyncBatchNorm, parallel wrappers (their collectives), a compiled
  root, a sequence-first batch, scores that are not the output of one model call, conv
  layers outside that call;
- isolated: compiled functions it calls run eagerly (``set_stance("force_eager")``: nothing
  is compiled for the new batch size); training's RNG state (CPU and CUDA) is restored
  after; buffers are swapped for copies during the call (running statistics, counters and
  EMA tables are never updated); tvis's hooks are paused; attributes the forward sets on
  its modules are put back; warnings and prints of the replayed forward are swallowed;
- checked: the replay's scores must equal the batch's scores of those samples (else
  randomness, data-dependent code or an input changed in place made the run differ), and
  no parameter may have changed (its version counter).

Whatever fails returns the reason, and Grad-CAM falls back to the whole batch's graph.
"""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from dataclasses import dataclass
from functools import partial

import torch
import torch.utils._pytree as pytree
from torch.nn.modules import module as nn_module
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.utils import parametrize

# Bytes of buffers copied for a replay: a model whose buffers are bigger than this (a
# large lookup table) is replayed not at all rather than copied at every step.
MAX_BUFFER_BYTES = 64 << 20

# How far the replayed scores may lie from the batch's, as a fraction of their largest
# magnitude (float32 kernels pick other algorithms for another batch size: ~1e-6).
TOLERANCE = 1e-3

# Grad-CAM's layers (gradcam._conv_outputs).
_CONV = ("Conv2d", "LazyConv2d")

# Dropout that zeroes and scales: its masks are read off its recorded input and output.
_DROPOUT = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d)
# Dropout that shifts what it drops (SELU's): refused.
_ALPHA_DROPOUT = (torch.nn.AlphaDropout, torch.nn.FeatureAlphaDropout)


@dataclass
class RootRun:
    """A root module call of a training batch, as it was made (for a replay)."""

    call: object
    module: torch.nn.Module
    args: tuple
    kwargs: dict
    output: object
    autocast: dict  # device type -> dtype, for each device autocast was on for


def note_root(batch, call, module, args, kwargs, output) -> None:
    """Remember a training batch's root call (held until the batch is released), when it
    ran a conv layer: only those calls are replayed for Grad-CAM."""
    if not any(c.cls in _CONV for c in batch.calls[call.id :]):
        return
    autocast = {
        device: torch.get_autocast_dtype(device)
        for device in ("cpu", "cuda")
        if torch.is_autocast_enabled(device)
    }
    batch.root_runs.append(RootRun(call, module, args, dict(kwargs or {}), output, autocast))


def note_norm(batch, call, output) -> None:
    """Remember a BatchNorm call's autograd node: it saved the batch's mean and inverse
    standard deviation (read at Grad-CAM time, before an in-place op after it replaces
    the output's node)."""
    node = getattr(output, "grad_fn", None)
    if node is not None:
        batch.norm_nodes[call.id] = node


@dataclass
class Kept:
    """The replayed forward of the first ``k`` samples."""

    scores: torch.Tensor  # [k, classes], in the replay's graph
    activations: list  # per Grad-CAM layer: its output for the k samples (None: not reached)


def replay(rec, batch, logits: torch.Tensor, layers: list, k: int) -> Kept | str:
    """The forward of the first ``k`` samples with the conv outputs of ``layers``, or why
    it cannot stand in for the batch's graph."""
    if rec.replay_refused:
        return rec.replay_refused
    if batch.seq_len is not None:
        return "the batch is sequence-first"
    found = _root_of(batch, logits)
    if found is None:
        return "the scores the loss got are not the output of one call of the model"
    run, leaf = found
    inside = _subtree(batch, run.call)
    if any(call.id not in inside for call, _ in layers):
        return "some conv layers ran outside the model call that made the scores"
    modules = dict(run.module.named_modules(remove_duplicate=True))
    why = _refusal(rec, run.module, modules.values())
    if why:
        return why
    names = {id(m): rec.module_names.get(id(m)) for m in modules.values()}
    stats = _batch_statistics(batch, modules.values(), names, inside)
    if isinstance(stats, str):
        return stats
    masks = _dropout_masks(batch, modules.values(), names, inside, k)
    if isinstance(masks, str):
        return masks
    b = batch.batch_size
    args, kwargs = pytree.tree_map(lambda a: _cut(a, b, k), (run.args, run.kwargs))
    wanted = _layer_modules(batch, layers, modules.values(), names, inside)
    if isinstance(wanted, str):
        return wanted
    captured: dict[int, list] = {id(m): [] for m, _ in wanted}
    try:
        with (
            _standing_in(modules.values(), stats, masks),
            _capturing([m for m, _ in wanted], captured),
        ):
            out = _call(run, args, kwargs)
    except Exception as e:
        return f"the model run again on the kept samples raised {type(e).__name__}"
    leaves = pytree.tree_leaves(out)
    scores = leaves[leaf] if leaf < len(leaves) else None
    if not isinstance(scores, torch.Tensor) or scores.shape != logits[:k].shape:
        return "the model run again gave scores of another shape"
    with torch.no_grad():
        want = logits[:k].detach()
        diff = float((scores.detach().float() - want.float()).abs().max())
        scale = max(1.0, float(want.float().abs().max()))
    tol = max(TOLERANCE, 8 * torch.finfo(logits.dtype).eps)
    if not diff <= tol * scale:
        return (
            "the model run again on the kept samples gave other scores than in the batch "
            "(randomness or data-dependent code in its forward)"
        )
    where = {cid: (id(m), i) for m, order in wanted for cid, i in order.items()}
    activations = []
    for call, _ in layers:
        outs, i = captured[where[call.id][0]], where[call.id][1]
        activations.append(outs[i] if i < len(outs) else None)
    return Kept(scores, activations)


def root_module(batch, logits: torch.Tensor) -> torch.nn.Module | None:
    """The model whose root call made ``logits``, if one did."""
    found = _root_of(batch, logits)
    return found[0].module if found else None


@contextlib.contextmanager
def isolated(rec, root: torch.nn.Module | None):
    """Around a replay and its gradient passes: training's RNG state, buffers, module
    attributes and parameters as they were; tvis and the forward's output quiet."""
    modules = list(root.modules()) if root is not None else []
    params = [(p, p._version) for m in modules for p in m._parameters.values() if p is not None]
    devices = sorted({p.device.index or 0 for p, _ in params if p.is_cuda})
    attrs = [(m, _attributes(m)) for m in modules]
    paused, rec.paused = rec.paused, True
    try:
        with (
            rec.quiet(),
            torch.random.fork_rng(devices=devices),
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        rec.paused = paused
        for m, before in attrs:
            _put_back(m, before)
        if any(p._version != v for p, v in params):
            rec.replay_refused = "the model's forward changed a parameter in place"
            rec.notice(
                "the model's forward changed one of its parameters in place when tvis ran it "
                "again for Grad-CAM; tvis no longer does so in this run.",
            )


# -- what is refused ---------------------------------------------------------------------


def _refusal(rec, root: torch.nn.Module, modules) -> str | None:
    tvis_pre, tvis_post = rec.module_hook_ids
    if set(nn_module._global_forward_pre_hooks) - {tvis_pre} or set(
        nn_module._global_forward_hooks
    ) - {tvis_post}:
        return "the script has global module hooks of its own"
    if type(root).__name__ == "OptimizedModule":
        return "the model is compiled"
    if _compiled_anything() and not hasattr(torch.compiler, "set_stance"):
        return "the script uses torch.compile"  # see _call
    own = {h.id for handles in rec.root_hooks.values() for h in handles}
    size = 0
    for m in modules:
        if set(m._forward_pre_hooks) - own or set(m._forward_hooks) - own:
            return f"{type(m).__name__} has forward hooks"
        if parametrize.is_parametrized(m):
            return f"{type(m).__name__} has parametrizations"
        if isinstance(m, torch.nn.SyncBatchNorm):
            return "SyncBatchNorm's statistics are the ranks' together"
        if isinstance(m, _ALPHA_DROPOUT) and m.training and m.p > 0:
            return "the model has active alpha dropout, whose masks a second run cannot repeat"
        if type(m).__module__.startswith(("torch.nn.parallel", "torch.distributed")):
            return f"the model is wrapped in {type(m).__name__}"
        size += sum(b.numel() * b.element_size() for b in m._buffers.values() if b is not None)
    if size > MAX_BUFFER_BYTES:
        return f"its buffers ({size / 1e6:.0f} MB) are too large to copy at every step"
    return None


def _compiled_anything() -> bool:
    """Whether torch.compile has compiled any frame in this process (Dynamo's own count;
    Dynamo not even imported: nothing)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    try:
        return bool(counters and counters["frames"]["ok"])
    except Exception:
        return True  # another layout of Dynamo's counters: assume it did


# -- finding what to replay --------------------------------------------------------------


def _root_of(batch, logits: torch.Tensor):
    """(the root call whose output holds ``logits``, the index of that leaf)."""
    for run in reversed(batch.root_runs):
        for i, leaf in enumerate(pytree.tree_leaves(run.output)):
            if leaf is logits:
                return run, i
    return None


def _subtree(batch, root) -> set[int]:
    inside = {root.id}
    for call in batch.calls[root.id + 1 :]:
        if call.parent in inside:
            inside.add(call.id)
    return inside


def _calls_of(batch, name: str, inside: set[int]) -> list:
    return [c for c in batch.calls if c.id in inside and c.name == name and c.kind == "module"]


def _layer_modules(batch, layers, modules, names, inside):
    """[(conv module, {call id: which of its calls})] for the Grad-CAM layers."""
    ids = {call.id for call, _ in layers}
    out = []
    for m in modules:
        calls = _calls_of(batch, names[id(m)], inside) if names.get(id(m)) else []
        order = {c.id: i for i, c in enumerate(calls) if c.id in ids}
        if order:
            out.append((m, order))
    if sum(len(order) for _, order in out) != len(ids):
        return "tvis could not match every conv layer to its module"
    return out


def _uses_batch_statistics(m) -> bool:
    return isinstance(m, _BatchNorm) and (
        m.training or (m.running_mean is None and m.running_var is None)
    )


def _batch_statistics(batch, modules, names, inside):
    """{id(BatchNorm): [(mean, inverse std) of each of its calls over the whole batch]}."""
    stats = {}
    for m in modules:
        if not _uses_batch_statistics(m):
            continue
        calls = _calls_of(batch, names.get(id(m)) or "", inside)
        if not calls:
            return f"{type(m).__name__} {names.get(id(m))} was not recorded"
        per_call = []
        for call in calls:
            found = _saved_statistics(batch.norm_nodes.get(call.id), m.num_features)
            if found is None:
                found = _statistics_of_input(batch, call, m.eps)
            if found is None:
                return f"the input of {call.name} was not kept"
            per_call.append(found)
        stats[id(m)] = per_call
    return stats


# The autograd nodes of batch norm in training mode, which save the batch's mean and
# inverse standard deviation as their second and third results (CPU, cuDNN, MIOpen).
_NORM_NODES = ("NativeBatchNormBackward0", "CudnnBatchNormBackward0", "MiopenBatchNormBackward0")


def _saved_statistics(node, channels: int):
    """What the batch's forward computed, for free: reading them again costs a pass over
    every BatchNorm input (a tenth of a ResNet's step)."""
    if node is None or type(node).__name__ not in _NORM_NODES:
        return None
    try:
        mean, invstd = node._saved_result1, node._saved_result2
    except (AttributeError, RuntimeError):  # another layout, or freed by a backward
        return None
    if mean.shape != (channels,) or invstd.shape != (channels,):
        return None
    return mean, invstd


def _statistics_of_input(batch, call, eps: float):
    entry = call.inputs[0].get("tensor") if call.inputs else None
    x = batch.objects.get(entry) if entry is not None else None
    if x is None:
        return None
    with torch.no_grad():
        var, mean = torch.var_mean(x.detach(), dim=[0, *range(2, x.dim())], correction=0)
        return mean, torch.rsqrt(var + eps)


def _drops(m) -> bool:
    return isinstance(m, _DROPOUT) and m.training and 0 < m.p < 1


def _dropout_masks(batch, modules, names, inside, k: int):
    """{id(Dropout): [the kept samples' mask, scaled, of each of its calls]}: where the
    batch's output is not zero (where the input was zero the mask is unknown, and the
    output and its gradient upstream of a ReLU zero whatever it was)."""
    masks = {}
    for m in modules:
        if not _drops(m):
            continue
        per_call = []
        for call in _calls_of(batch, names.get(id(m)) or "", inside):
            got = [
                batch.objects.get(a.get("tensor")) if a.get("tensor") is not None else None
                for a in (call.inputs[:1] + call.outputs[:1])
            ]
            if len(got) != 2 or got[0] is None or got[1] is None:
                return f"the input or output of {call.name} was not kept"
            with torch.no_grad():
                kept = got[1].detach()[:k] != 0
                per_call.append(kept.to(got[0].dtype).div_(1 - m.p))
        masks[id(m)] = per_call
    return masks


def _cut(a, b: int, k: int):
    if isinstance(a, torch.Tensor) and a.dim() > 0 and a.shape[0] == b:
        return a[:k]
    return a


# -- running it --------------------------------------------------------------------------


def _call(run: RootRun, args, kwargs):
    buffers = {name: b.clone() for name, b in run.module.named_buffers()}
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.enable_grad())
        if "torch._dynamo" in sys.modules and hasattr(torch.compiler, "set_stance"):
            # Compiled code the forward calls runs as plain Python: another batch size
            # would compile it again, and training could then run that (dynamic-shape)
            # code instead of the one it compiled.
            stack.enter_context(torch.compiler.set_stance("force_eager"))
        for device in ("cpu", "cuda"):
            # Autocast as it was around the model call (the loss may run under another).
            if device in run.autocast:
                stack.enter_context(torch.autocast(device, dtype=run.autocast[device]))
            elif torch.is_autocast_enabled(device):
                stack.enter_context(torch.autocast(device, enabled=False))
        return torch.func.functional_call(run.module, buffers, args, kwargs, strict=False)


@contextlib.contextmanager
def _standing_in(modules, stats: dict, masks: dict):
    """Each BatchNorm that normalises with batch statistics uses the whole batch's; each
    dropout applies the batch's masks of the kept samples."""
    patched = []
    for m in modules:
        if id(m) in stats:
            forward = partial(_frozen_batch_norm, m, iter(stats[id(m)]))
        elif id(m) in masks:
            forward = partial(_masked_dropout, iter(masks[id(m)]))
        else:
            continue
        patched.append((m, m.__dict__.get("forward")))
        m.forward = forward
    try:
        yield
    finally:
        for m, before in patched:
            if before is None:
                del m.forward
            else:
                m.forward = before


def _frozen_batch_norm(m, calls, x):
    mean, invstd = next(calls, (None, None))
    if mean is None:
        raise RuntimeError("more BatchNorm calls than recorded")
    shape = (1, -1) + (1,) * (x.dim() - 2)
    scale = invstd if m.weight is None else invstd * m.weight
    y = (x - mean.view(shape)) * scale.view(shape)
    return y if m.bias is None else y + m.bias.view(shape)


def _masked_dropout(calls, x):
    mask = next(calls, None)
    if mask is None or mask.shape != x.shape:
        raise RuntimeError("dropout calls other than recorded")
    return x * mask


@contextlib.contextmanager
def _capturing(modules, captured: dict):
    handles = [
        m.register_forward_hook(lambda m, args, out: captured[id(m)].append(out)) for m in modules
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _attributes(m: torch.nn.Module) -> dict:
    """A module's attributes, with shallow copies of its containers' contents."""
    return {key: (value, _contents(value)) for key, value in m.__dict__.items() if key != "forward"}


def _contents(value):
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, set):
        return set(value)
    return None


def _same(a, b) -> bool:
    """Same members, by identity (tensors compared with == would compare values)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(a[key] is b[key] for key in a)
    if isinstance(a, set):
        return a == b
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _put_back(m: torch.nn.Module, before: dict) -> None:
    now = m.__dict__
    for key in [k for k in now if k not in before and k != "forward"]:
        del now[key]
    for key, (value, contents) in before.items():
        if now.get(key, _MISSING) is not value:
            now[key] = value
        if contents is not None and not _same(_contents(value), contents):
            if isinstance(value, list):
                value[:] = contents
            else:
                value.clear()
                value.update(contents)


_MISSING = object()
