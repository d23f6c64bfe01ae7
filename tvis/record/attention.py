"""Attention weights: softmaxes that really are attention, and fused attention recomputed.

Three ways in: a softmax op in project code (``ops.py``), an ``nn.Softmax`` module call,
and ``F.scaled_dot_product_attention`` — which never materialises the weights, so they are
recomputed for the kept samples from ``q``, ``k``, the mask, ``is_causal``, ``scale`` and
grouped heads under ``no_grad`` and labelled "recomputed from q·k". The same patch sees
``nn.MultiheadAttention(need_weights=False)``, which calls that kernel; with
``need_weights=True`` the module returns the weights itself.

A softmax counts when it normalises the last dim of a ``[B, T, T]`` or ``[B, H, Tq, Tk]``
tensor with a batch dim and its input came from a query·key product: the nearest matrix
product a few autograd nodes up multiplies two activations, not an activation by a
layer's weight. A segmentation head's per-pixel softmax over classes (dim 1) and a
language model's softmax over the vocabulary (a product with the output layer's weight)
do not count.
"""

from __future__ import annotations

import functools
import math
import threading

import torch
import torch.nn.functional as F

from tvis.record import insights
from tvis.record.compiled import compiling
from tvis.record.extension import Extension

# How the recomputed weights are labelled in the batch record and on the page.
RECOMPUTED = "recomputed from q·k"

# How many autograd nodes above the softmax input a matmul may be: scale, mask, bias.
SEARCH_DEPTH = 6
# Autograd nodes of matrix products (matmul of 3-D and 4-D tensors ends in Bmm).
_PRODUCTS = ("Bmm", "Mm", "Baddbmm", "Addmm", "Matmul", "Einsum")
# Nodes that only reshape, cast or select: a weight reached through them is still a weight.
_SHAPE_ONLY = (
    "View",
    "UnsafeView",
    "Reshape",
    "Transpose",
    "TBackward",
    "Permute",
    "Expand",
    "Clone",
    "Unsqueeze",
    "Squeeze",
    "ToCopy",
    "AsStrided",
    "Select",
    "Slice",
)


def is_attention(x: torch.Tensor, dim, batch_size: int | None) -> bool:
    if x.dim() not in (3, 4) or batch_size is None or x.shape[0] != batch_size:
        return False
    if dim is None or dim not in (-1, x.dim() - 1):
        return False
    if x.shape[-1] < 2 or x.shape[-2] < 2:
        return False
    return _from_product(x.grad_fn)


def _from_product(node) -> bool:
    """Whether the nearest matrix products above ``node`` multiply two activations."""
    frontier, seen = [node], set()
    for _ in range(SEARCH_DEPTH):
        following = []
        for n in frontier:
            if n is None or n in seen:
                continue
            seen.add(n)
            if type(n).__name__.startswith(_PRODUCTS):
                if _of_activations(n):
                    return True
                continue  # a layer's own product (Linear): what lies above it is not q·k
            following += [f for f, _ in n.next_functions]
        frontier = following
    return False


def _of_activations(product) -> bool:
    operands = [f for f, _ in product.next_functions if f is not None]
    return len(operands) >= 2 and not any(_is_weight(f) for f in operands)


def _is_weight(node) -> bool:
    """Whether ``node`` is a parameter (a leaf), possibly transposed, viewed or cast."""
    for _ in range(SEARCH_DEPTH):
        name = type(node).__name__
        if name == "AccumulateGrad":
            return True
        if not name.startswith(_SHAPE_ONLY):
            return False
        inputs = [f for f, _ in node.next_functions if f is not None]
        if len(inputs) != 1:
            return False
        node = inputs[0]
    return False


def capture(rec, call, args, kwargs, out) -> None:
    """Keep ``out`` as attention weights if its input qualifies (see module docstring)."""
    batch = rec.batch
    if batch is None or batch.light or not isinstance(out, torch.Tensor) or not args:
        return
    x = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if not isinstance(x, torch.Tensor) or not is_attention(x, dim, batch.batch_size):
        return
    owner = next((c for c in reversed(rec.stack) if c is not None and c.kind == "module"), call)
    _add(rec, batch, owner, call, batch.tensor(out), list(out.shape))


def _add(rec, batch, owner, call, entry: int, shape: list, **extra) -> None:
    insights.note(rec.data_info, "attention", owner.name)
    record = {
        "call": owner.id if owner.owner == batch.index else (call.id if call else None),
        "module": owner.name,
        "tensor": entry,
        "shape": shape,
        "heads": int(shape[1]) if len(shape) == 4 else 1,
    }
    batch.sections.setdefault("attention", []).append({**record, **extra})


class AttentionCapture(Extension):
    """Attention the model's own softmax ops do not show: fused ``scaled_dot_product_attention``
    calls (wherever they run, project or library code), ``nn.Softmax`` modules, and the
    weights ``nn.MultiheadAttention`` returns."""

    def install(self, recorder) -> None:
        original = F.scaled_dot_product_attention
        recorder.patches.set(F, "scaled_dot_product_attention", _wrap(recorder, original))

    def on_module_exit(self, recorder, batch, call, module, output) -> None:
        if batch.light:
            return
        if isinstance(module, torch.nn.Softmax) and call.inputs:
            x = batch.objects.get(call.inputs[0].get("tensor"))
            if isinstance(x, torch.Tensor):
                capture(recorder, call, (x, module.dim), {}, output)
        elif isinstance(module, torch.nn.MultiheadAttention):
            _returned_weights(recorder, batch, call, output)


def _returned_weights(rec, batch, call, output) -> None:
    """The weights ``nn.MultiheadAttention(need_weights=True)`` returns: ``[B, L, S]``
    (averaged over heads) or ``[B, H, L, S]``, batch first whatever ``batch_first`` says."""
    if not isinstance(output, tuple) or len(output) != 2:
        return
    weights = output[1]
    if not isinstance(weights, torch.Tensor) or weights.dim() not in (3, 4):
        return
    if batch.batch_size is not None and weights.shape[0] != batch.batch_size:
        return
    _add(rec, batch, call, call, batch.tensor(weights), list(weights.shape))


def _wrap(rec, original):
    @functools.wraps(original)
    def scaled_dot_product_attention(*args, **kwargs):
        out = original(*args, **kwargs)
        if (
            compiling()
            or rec.busy
            or rec.paused
            or threading.get_ident() != rec.thread
            or rec.batch is None
            or rec.batch.light
            or rec.rerun()
        ):
            return out
        with rec.work:
            try:
                _capture_fused(rec, rec.batch, args, kwargs)
            except Exception as e:
                rec.guard("recomputing attention weights from q·k", e)
        return out

    return scaled_dot_product_attention


# scaled_dot_product_attention's parameters in order, for calls that pass them by position.
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def _capture_fused(rec, batch, args: tuple, kwargs: dict) -> None:
    given = {**dict(zip(_SDPA_ARGS, args, strict=False)), **kwargs}
    q, k = given.get("query"), given.get("key")
    if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor) or q.dim() not in (3, 4):
        return
    owner = next((c for c in reversed(rec.stack) if c is not None and c.kind == "module"), None)
    if owner is None:
        return  # no model call to name it by
    # [N, H, L, E] is batch first by the kernel's definition (a sequence-first model's
    # MultiheadAttention transposes before it); a 3-D q may have heads folded into N.
    if q.dim() == 3 and batch.batch_size is not None and q.shape[0] != batch.batch_size:
        return
    full = [int(q.shape[0]), *([int(q.shape[1])] if q.dim() == 4 else []), q.shape[-2], k.shape[-2]]
    # Samples recomputed: the kept ones, as many as --max-elems holds whole (the maps of one
    # sample are [H, L, S]; a long sequence's would cost gigabytes on the device).
    per_sample = math.prod(full[1:])
    n = min(batch.samples, batch.settings.max_elems // max(per_sample, 1))
    if n <= 0:
        why = "attention_unkept" if batch.samples <= 0 else "attention_too_large"
        insights.note(rec.data_info, why, owner.name)
        return
    with torch.no_grad():
        weights = recompute(
            q[:n],
            k[:n],
            _kept_mask(given.get("attn_mask"), q, n),
            bool(given.get("is_causal", False)),
            given.get("scale"),
        )
    dropout = float(given.get("dropout_p") or 0.0)
    extra = {"recomputed": RECOMPUTED, **({"dropout_p": dropout} if dropout else {})}
    # No statistics: only the attention view reads these maps, and they are many per batch.
    _add(rec, batch, owner, None, batch.derived(weights, summarize=False), full, **extra)


def _kept_mask(mask, q: torch.Tensor, n: int):
    """The mask rows of the kept samples: a mask broadcasts from the right, so its first
    dim is the batch dim only when it has as many dims as ``q`` and is not 1."""
    if isinstance(mask, torch.Tensor) and mask.dim() == q.dim() and mask.shape[0] > 1:
        return mask[:n]
    return mask


def recompute(q, k, mask, is_causal: bool, scale) -> torch.Tensor:
    """softmax(q·kᵀ · scale + bias) as ``scaled_dot_product_attention`` defines it, in float32
    at least, before dropout. Grouped heads (fewer k heads than q heads) are repeated as
    ``enable_gqa`` does; a row masked entirely (NaN in the kernel) is shown as zeros."""
    dtype = torch.promote_types(q.dtype, torch.float32)
    q, k = q.detach().to(dtype), k.detach().to(dtype)
    if q.dim() == 4 and k.dim() == 4 and k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = (q @ k.transpose(-2, -1)) * factor
    length, source = scores.shape[-2], scores.shape[-1]
    if is_causal:
        kept = torch.ones(length, source, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~kept, float("-inf"))
    if isinstance(mask, torch.Tensor):
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.detach().to(dtype)
    return torch.softmax(scores, dim=-1).nan_to_num(0.0)
