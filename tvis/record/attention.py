"""Attention weights: softmaxes computed in project code that really are attention.

A softmax counts when it normalises the last dim of a ``[B, T, T]`` or ``[B, H, Tq, Tk]``
tensor with a batch dim and its input came from a query·key product: the nearest matrix
product a few autograd nodes up multiplies two activations, not an activation by a
layer's weight. A segmentation head's per-pixel softmax over classes (dim 1) and a
language model's softmax over the vocabulary (a product with the output layer's weight)
do not count.
"""

from __future__ import annotations

import torch

from tvis.record import insights

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
    insights.note(rec.data_info, "attention", owner.name)
    batch.sections.setdefault("attention", []).append(
        {
            "call": owner.id if owner.owner == batch.index else call.id,
            "module": owner.name,
            "tensor": batch.tensor(out),
            "shape": list(out.shape),
            "heads": int(out.shape[1]) if out.dim() == 4 else 1,
        }
    )
