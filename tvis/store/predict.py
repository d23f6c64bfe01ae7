"""What plain SGD makes of a weight, predicted from stored values: the base a Δw is XOR-ed
against when that shrinks it (format 5).

A step's Δw stored as the XOR of the weights after and before the step keeps about 21 of
every 32 bits (the after-weights' mantissas are noise against the before). SGD's own
formula, applied to the stored weight, the stored (rounded) gradient and the previous
step's stored Δw, lands within a few units in the last place of the after-weights, so
their XOR is mostly zero bits. The writer (tvis/record/params.py) and the reader
(tvis/store/reader.py) both call ``sgd_after`` on the same stored arrays, so they get
the same bits: elementwise float64 operations only (each correctly rounded, whatever the
machine or numpy's SIMD path), in one fixed order, and every element whose bits could
depend on the machine — a non-finite value (NaN payloads differ between CPUs), a
subnormal input or a result below float32's normal range (flush-to-zero modes) — is
predicted as the weight before the step, by bit masks that no floating-point mode
changes. A prediction only has to be good, not exact: whatever it is, the XOR against it
is lossless. Needs numpy only (no torch), so the agent reads what the recorder wrote.

The rule of ``torch.optim.SGD`` (per element, ``G = ±g + wd·w``)::

    buf = G                                    # the parameter's first step (no history)
    buf = momentum·buf_prev + (1 − dampening)·G,   buf_prev = −Δw_prev / lr_prev
    d   = G + momentum·buf   (nesterov)   or   buf   or   G (no momentum)
    predicted after = w − lr·d

For nesterov, ``Δw_prev = −lr_prev·(G_prev + momentum·buf_prev)``, so the buffer before is
recovered with the previous step's weight and gradient as well.
"""

from __future__ import annotations

from typing import Any

import numpy as np

RULE = "sgd"

# The hyper-parameters of a param group the rule reads, and the types each must have.
HYPER = {
    "lr": float,
    "momentum": float,
    "dampening": float,
    "weight_decay": float,
    "nesterov": bool,
    "maximize": bool,
}


def sgd_hyper(group: dict[str, Any]) -> dict[str, Any] | None:
    """The rule's hyper-parameters from a recorded param group, or None when one is
    missing, not a plain number (a tensor learning rate summarised by type) or so extreme
    that float64 products of it could leave the normal range."""
    hyper: dict[str, Any] = {}
    for key, kind in HYPER.items():
        value = group.get(key)
        if kind is bool:
            if value is not True and value is not False:
                return None
            hyper[key] = value
        else:
            if type(value) not in (int, float) or not (value == 0 or _LOW <= abs(value) <= _HIGH):
                return None
            hyper[key] = float(value)
    return hyper


# Magnitudes kept away from float64's edges: with inputs and hyper-parameters inside
# them, no product, quotient or sum of the rule is subnormal or overflows.
_LOW, _HIGH = 1e-30, 1e30
_LOW_VALUE, _HIGH_VALUE = 1e-150, 1e150


def same_rule(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two steps ran the same rule but for the learning rate (a scheduler's change):
    only then does the previous step's Δw tell its momentum buffer."""
    return all(a[k] == b[k] for k in HYPER if k != "lr")


def usable(before: np.ndarray, grad: np.ndarray | None) -> bool:
    """Whether a weight and its stored gradient can be predicted at all: the same region of
    a float32 or float64 parameter."""
    return (
        grad is not None
        and before.dtype in (np.float32, np.float64)
        and grad.dtype == before.dtype
        and grad.shape == before.shape
    )


def sgd_after(
    before: np.ndarray,
    grad: np.ndarray,
    hyper: dict[str, Any],
    prev: tuple[float, np.ndarray, np.ndarray | None, np.ndarray | None] | None = None,
) -> np.ndarray:
    """The weights SGD is predicted to leave, in ``before``'s dtype and shape.

    ``prev``: (lr of the previous step, its Δw, and for nesterov its weight and gradient),
    all as stored, or None for a parameter's first step (the buffer is then the force)."""
    lr, momentum = hyper["lr"], hyper["momentum"]
    nesterov = hyper["nesterov"]
    inputs = [before, grad] + ([a for a in prev[1:] if a is not None] if prev else [])
    with np.errstate(all="ignore"):
        unsafe = np.zeros(before.shape, bool)
        for a in inputs:
            unsafe |= _unsafe(a.reshape(before.shape))
        w = before.astype(np.float64)
        g = _force(grad, w, hyper)
        d = g
        if momentum != 0:
            buf = g
            if prev is not None:
                buf_prev = _buffer_before(prev, hyper).reshape(before.shape)
                buf = momentum * buf_prev + (1 - hyper["dampening"]) * g
            d = g + momentum * buf if nesterov else buf
        after = w - lr * d
        unsafe |= ~np.isfinite(after)
        unsafe |= (after != 0) & (np.abs(after) < np.finfo(before.dtype).tiny)
        predicted = after.astype(before.dtype)
    return np.where(unsafe, before, predicted)


def _force(grad: np.ndarray, w: np.ndarray, hyper: dict[str, Any]) -> np.ndarray:
    """``±g + wd·w`` in float64, as torch forms it (maximize flips the gradient first)."""
    g = grad.astype(np.float64).reshape(w.shape)
    if hyper["maximize"]:
        g = -g
    if hyper["weight_decay"] != 0:
        g = g + hyper["weight_decay"] * w
    return g


def _buffer_before(prev: tuple, hyper: dict[str, Any]) -> np.ndarray:
    """The momentum buffer the previous step left, from what it stored."""
    lr_prev, dw_prev, w_prev, g_prev = prev
    buf = dw_prev.astype(np.float64) / -lr_prev  # the step moved by −lr·d
    if hyper["nesterov"]:  # d = G + momentum·buf
        buf = (buf - _force(g_prev, w_prev.astype(np.float64), hyper)) / hyper["momentum"]
    return buf


def _unsafe(array: np.ndarray) -> np.ndarray:
    """Elements whose prediction could differ between machines: non-finite, subnormal
    (found from their bits: a denormals-are-zero mode reads them as 0), or so far from 1
    that float64 products of them could leave the normal range."""
    size = array.dtype.itemsize
    word = np.ascontiguousarray(array).view(f"<u{size}")
    magnitude = word & np.array((1 << (8 * size - 1)) - 1, dtype=f"<u{size}")
    smallest_normal = np.array(np.finfo(array.dtype).tiny, array.dtype).view(f"<u{size}")
    unsafe = (magnitude != 0) & (magnitude < smallest_normal)
    unsafe |= ~np.isfinite(array)
    if array.dtype.itemsize > 4:  # float32's own range is well inside the bounds
        unsafe |= ((array != 0) & (np.abs(array) < _LOW_VALUE)) | (np.abs(array) > _HIGH_VALUE)
    return unsafe
