"""Activations and gradients stored with fewer mantissa bits, everything else exact.

A float's low mantissa bits are noise to every picture a viewer draws, and they are what
lossless coding cannot shrink. ``round_mantissa`` keeps ``bits`` of them, rounding to
nearest (ties to even) on the bit pattern, so the value keeps its float32 (or float64)
range: the relative error is at most 2**-(bits + 1). So that a debugger never invents a
value, NaN and Inf keep their bits (payload and sign included), subnormal numbers stay
exact (rounding would turn the smallest into zeros), and a finite value so large that
rounding up would reach Inf is cut down instead (relative error below 2**-bits).

``exact_ids`` names the entries of a batch record that keep every bit whatever the
setting: what the data pipeline made (inputs, labels, token ids), the loss call's inputs
and outputs, and arrays tvis derived (per-sample losses, Grad-CAM maps) except the pooled
representations (a module's output averaged per sample, ``record["repr"]``): only a PCA
scatter reads those, and they summarise activations that are themselves stored rounded.
Statistics are computed by the recorder from the exact values before anything is rounded.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tvis.store import host_memory

# Mantissa bits kept by default: a relative error of at most 2**-11, far below what a
# heatmap's colours, a histogram's bars or a printed value with 4 significant digits show.
MANTISSA_BITS = 10

# dtype -> (same-size unsigned integer, stored mantissa bits, exponent mask)
_LAYOUT: dict[np.dtype, tuple[np.dtype, int, int]] = {
    np.dtype("<f4"): (np.dtype("<u4"), 23, 0x7F80_0000),
    np.dtype("<f8"): (np.dtype("<u8"), 52, 0x7FF0_0000_0000_0000),
}


def rounds(dtype: np.dtype, bits: int | None) -> bool:
    """Whether ``round_mantissa`` changes values of ``dtype`` at ``bits`` (float16 and
    bfloat16 hold 10 and 7 bits already: they stay as they are)."""
    layout = _LAYOUT.get(np.dtype(dtype))
    return bits is not None and layout is not None and bits < layout[1]


def round_mantissa(values: np.ndarray, bits: int | None, in_place: bool = False) -> np.ndarray:
    """``values`` (contiguous, little-endian) with ``bits`` mantissa bits kept: a new
    array (a large one outside the malloc heap: host_memory.py), ``values`` itself
    rounded when ``in_place``, or ``values`` untouched when nothing changes. Worked
    through in blocks, so the temporaries are small whatever the size of ``values``."""
    if bits is None or not rounds(values.dtype, bits):
        return values
    unsigned = _LAYOUT[values.dtype][0]
    out = values if in_place else host_memory.empty(values.shape, values.dtype)
    u, rounded = values.reshape(-1).view(unsigned), out.reshape(-1).view(unsigned)
    for start in range(0, u.size, _BLOCK):
        block = u[start : start + _BLOCK]
        if in_place:
            block = block.copy()
        _round_block(block, rounded[start : start + _BLOCK], values.dtype, bits)
    return out


# Elements rounded at a time (256 KB of float32): each step's temporaries are this size.
_BLOCK = 1 << 16


def _round_block(u: np.ndarray, rounded: np.ndarray, dtype: np.dtype, bits: int) -> None:
    """Round the bit patterns ``u`` into ``rounded`` (same size)."""
    unsigned, stored, exponent = _LAYOUT[dtype]
    drop = stored - bits
    one = unsigned.type(1)
    low = unsigned.type((1 << drop) - 1)
    half = unsigned.type(1 << (drop - 1))
    exponent = unsigned.type(exponent)
    # Round half to even: add half - 1, plus one more when the kept part is odd.
    np.right_shift(u, unsigned.type(drop), out=rounded)
    rounded &= one
    rounded += half - one
    rounded += u
    rounded &= ~low
    # NaN, Inf and subnormals stay bit for bit; a finite value that rounded onto Inf is
    # cut down instead.
    kept = u & exponent
    was_special = (kept == exponent) | (kept == 0)
    became_special = (rounded & exponent) == exponent
    odd = was_special | became_special
    if odd.any():
        rounded[odd] = np.where(was_special[odd], u[odd], u[odd] & ~low)


def exact_ids(record: dict) -> set[int]:
    """Ids of the tensor entries of a batch record stored exactly whatever the setting."""
    exact: set[int] = set()
    for call in record.get("calls") or []:
        if call.get("phase") == "data" or call.get("kind") in ("loss", "transform", "tokenizer"):
            exact.update(_tensor_ids(call.get("inputs") or []))
            exact.update(_tensor_ids(call.get("outputs") or []))
    data = record.get("data") or {}
    exact.update(_tensor_ids(data.get("batch") or []))
    loss = record.get("loss") or {}
    for key in ("per_element", "valid", "target", "pred", "p_target", "top_i", "top_p"):
        if isinstance(loss.get(key), int):
            exact.add(loss[key])
    pooled = {r.get("tensor") for r in record.get("repr") or [] if isinstance(r, dict)}
    for entry in record.get("tensors") or []:
        if entry.get("raw_image") or (entry.get("derived") and entry["id"] not in pooled):
            exact.add(entry["id"])
    return exact


def _tensor_ids(args: Iterable[dict]) -> Iterable[int]:
    for arg in args:
        if isinstance(arg, dict):
            for key in ("tensor", "image"):
                if isinstance(arg.get(key), int):
                    yield arg[key]
