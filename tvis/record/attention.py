"""Attention weights: softmaxes computed in project code that really are attention.

A softmax counts when it normalises the last dim of a ``[B, T, T]`` or ``[B, H, Tq, Tk]``
tensor with a batch dim and its input came from a query·key product (a matmul a few
autograd nodes up). A segmentation head's per-pixel softmax over classes does not.
"""

from __future__ import annotations

import torch

# How many autograd nodes above the softmax input a matmul may be: scale, mask, bias.
SEARCH_DEPTH = 6
_PRODUCTS = ("Bmm", "Mm", "Baddbmm", "Matmul", "Einsum", "UnsafeView")


def is_attention(x: torch.Tensor, dim, batch_size: int | None) -> bool:
    if x.dim() not in (3, 4) or batch_size is None or x.shape[0] != batch_size:
        return False
    if dim is None or dim not in (-1, x.dim() - 1):
        return False
    if x.shape[-1] < 2 or x.shape[-2] < 2:
        return False
    return _from_product(x.grad_fn)


def _from_product(node) -> bool:
    frontier = [node]
    for _ in range(SEARCH_DEPTH):
        following = []
        for n in frontier:
            if n is None:
                continue
            if type(n).__name__.startswith(_PRODUCTS):
                return True
            following += [f for f, _ in n.next_functions]
        frontier = following
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
    batch.sections.setdefault("attention", []).append(
        {
            "call": owner.id if owner.owner == batch.index else call.id,
            "module": owner.name,
            "tensor": batch.tensor(out),
            "shape": list(out.shape),
            "heads": int(out.shape[1]) if out.dim() == 4 else 1,
        }
    )
