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
depend on the machine — a non-finite result (NaN payloads differ between CPUs), a
subnormal input (found from its bits) or a result outside the dtype's normal range
(flush-to-zero modes) — is predicted as the weight before the step. With the
hyper-parameters and float64 inputs kept inside ``_LOW``..``_HIGH`` no intermediate
sum or product is subnormal, so no floating-point mode changes the others. A prediction only has to be good, not exact: whatever it is, the XOR against it
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
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            if not (value == 0 or _LOW <= abs(value) <= _HIGH):
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
    all as stored, or None for a parameter's first step (the buffer is then the force).
    The rule is linear in its arrays, so it is evaluated as one sum of scaled arrays (the
    scales from the hyper-parameters, in Python floats), block by block in the cache."""
    scales, arrays = _scales(hyper, prev), _arrays(before, grad, prev)
    terms = [(c, a) for c, a in zip(scales, arrays, strict=True) if c != 0 and a is not None]
    flat = [np.ascontiguousarray(a).reshape(-1) for _, a in terms]
    source = np.ascontiguousarray(before).reshape(-1)
    predicted = np.empty_like(source)
    dtype, n = before.dtype, source.size
    low, high = float(np.finfo(dtype).tiny), float(np.finfo(dtype).max)
    size = min(BLOCK, n) or 1
    total, scaled = np.empty(size, np.float64), np.empty(size, np.float64)
    unsafe, check = np.empty(size, bool), np.empty(size, bool)
    with np.errstate(all="ignore"):
        for start in range(0, n, size):
            end = min(start + size, n)
            k = end - start
            acc, tmp, bad, test = total[:k], scaled[:k], unsafe[:k], check[:k]
            acc[...] = 0.0
            for (scale, _), array in zip(terms, flat, strict=True):
                np.multiply(array[start:end], scale, out=tmp, dtype=np.float64)
                np.add(acc, tmp, out=acc)
            # Unsafe: a result that is non-finite, out of range or subnormal once cast ...
            np.abs(acc, out=tmp)
            np.greater_equal(tmp, low, out=bad)
            np.less_equal(tmp, high, out=test)
            np.logical_and(bad, test, out=bad)
            np.equal(tmp, 0.0, out=test)
            np.logical_or(bad, test, out=bad)
            np.logical_not(bad, out=bad)
            # ... or any subnormal (or, in float64, far out of range) input.
            for array in flat:
                bad |= _unsafe(array[start:end])
            predicted[start:end] = acc
            np.copyto(predicted[start:end], source[start:end], where=bad)
    return predicted.reshape(before.shape)


# Elements predicted at a time: float64 scratch arrays of 256 KiB stay in the cache.
BLOCK = 1 << 15


def _arrays(before, grad, prev) -> list:
    """The arrays the rule is linear in: w, g, Δw_prev, w_prev, g_prev."""
    if prev is None:
        return [before, grad, None, None, None]
    return [before, grad, prev[1], prev[2], prev[3]]


def _scales(hyper: dict[str, Any], prev) -> list[float]:
    """The scales of ``_arrays`` in ``w − lr·d``.

    With G = ±g + wd·w and the buffer the previous step left B = −Δw_prev / lr_prev
    (nesterov: (−Δw_prev / lr_prev − G_prev) / momentum), torch's ``d`` is
    k_G·G + k_dw·Δw_prev + k_Gp·G_prev."""
    lr, m, wd = hyper["lr"], hyper["momentum"], hyper["weight_decay"]
    damp, sign = hyper["dampening"], -1.0 if hyper["maximize"] else 1.0
    k_g, k_dw, k_gp = 1.0, 0.0, 0.0
    if m != 0:
        if prev is None:  # the buffer is created as G
            k_g = 1.0 + m if hyper["nesterov"] else 1.0
        elif hyper["nesterov"]:
            k_g, k_dw, k_gp = 1.0 + m * (1.0 - damp), -m / prev[0], -m
        else:
            k_g, k_dw = 1.0 - damp, -m / prev[0]
    return [
        1.0 - lr * k_g * wd,
        -lr * k_g * sign,
        -lr * k_dw,
        -lr * k_gp * wd,
        -lr * k_gp * sign,
    ]


def _unsafe(array: np.ndarray) -> np.ndarray:
    """Inputs whose part in the prediction could differ between machines: subnormal ones
    (found from their bits: a denormals-are-zero mode reads them as 0) and, in float64,
    ones so far from 1 that products of them could leave the normal range. (A non-finite
    input makes the result non-finite, which is caught there.)"""
    size = array.dtype.itemsize
    word = array.view(f"<u{size}") << np.array(1, f"<u{size}")  # the sign shifted out
    smallest_normal = np.array(np.finfo(array.dtype).tiny, array.dtype).view(f"<u{size}")
    # 0 < magnitude < smallest normal, as one unsigned comparison (0 - 1 wraps around)
    unsafe = (word - np.array(1, f"<u{size}")) < (smallest_normal << np.array(1, f"<u{size}")) - 1
    if size > 4:  # float32's own range is well inside the bounds
        magnitude = np.abs(array)
        unsafe |= ((magnitude < _LOW_VALUE) & (magnitude != 0)) | (magnitude > _HIGH_VALUE)
    return unsafe
