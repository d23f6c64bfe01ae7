"""Numpy views computed next to the data: a sample sliced out, a 2-D window, block means,
pictures, bounded raw values. Pure functions on arrays; they raise ``AgentError`` (400/404)
with a sentence when asked for something the array does not have."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError

# A view or picture larger than this per side is more than any terminal shows and would
# push a reply towards the frame limit.
MAX_SIDE = 2048


@dataclass(frozen=True)
class Plane:
    """A 2-D slice of a tensor and how it was taken."""

    values: np.ndarray
    sample: int | None
    index: list[int]


def check_size(width: int, height: int) -> None:
    if not (1 <= width <= MAX_SIDE and 1 <= height <= MAX_SIDE):
        raise AgentError(f"width and height must be between 1 and {MAX_SIDE}.", BAD_REQUEST)


def take_sample(array: np.ndarray, batch_dim: int | None, sample: int | None) -> np.ndarray:
    """``array`` with ``sample`` taken out along ``batch_dim``; unchanged without either."""
    if sample is None or batch_dim is None or not 0 <= batch_dim < array.ndim:
        return array
    _check_sample(array, batch_dim, sample)
    # Indexing, not np.take: values stored in chunks then decode this sample only.
    return np.array(array[(slice(None),) * batch_dim + (sample,)])


def _check_sample(array: np.ndarray, batch_dim: int, sample: int) -> None:
    kept = array.shape[batch_dim]
    if sample < 0:
        raise AgentError(f"sample must be 0 or more, not {sample}.", BAD_REQUEST)
    if sample >= kept:
        raise AgentError(
            f"sample {sample} was not kept (values exist for the first {kept}).", NOT_FOUND
        )


def plane(
    array: np.ndarray, batch_dim: int | None, sample: int | None, index: Sequence[int]
) -> Plane:
    """The 2-D plane over the last two dims, the sample taken out and leading dims fixed
    by ``index`` (missing entries are 0). 0-D and 1-D tensors become one row."""
    used_sample = sample if batch_dim is not None and 0 <= batch_dim < array.ndim else None
    shape = list(array.shape)
    if used_sample is not None and batch_dim is not None:
        _check_sample(array, batch_dim, used_sample)
        del shape[batch_dim]
    leading = max(len(shape) - 2, 0)
    if len(index) > leading:
        raise AgentError(
            f"index has {len(index)} entries but the tensor has {leading} leading dims.",
            BAD_REQUEST,
        )
    full = list(index) + [0] * (leading - len(index))
    for dim, (i, size) in enumerate(zip(full, shape[:leading], strict=True)):
        if not 0 <= i < size:
            raise AgentError(
                f"index {i} is out of range for dim {dim} of size {size}.", BAD_REQUEST
            )
    # One index for the sample and the leading dims: values stored in chunks then decode
    # only the chunk holding this plane.
    key: list[Any] = [*full, *[slice(None)] * (len(shape) - leading)]
    if used_sample is not None and batch_dim is not None:
        key.insert(batch_dim, used_sample)
    values = array[tuple(key)] if leading or used_sample is not None else array
    if values.ndim < 2:
        values = values.reshape(1, -1)
    return Plane(values, used_sample, full)


def crop(values: np.ndarray, window: Sequence[int] | None) -> tuple[np.ndarray, list[int]]:
    """The ``[row0, row1, col0, col1]`` window of a 2-D array (clipped to it), and the window."""
    h, w = values.shape
    if window is None:
        return values, [0, h, 0, w]
    if len(window) != 4:
        raise AgentError("window must be [row0, row1, col0, col1].", BAD_REQUEST)
    r0, r1 = max(window[0], 0), min(window[1], h)
    c0, c1 = max(window[2], 0), min(window[3], w)
    if r0 >= r1 or c0 >= c1:
        raise AgentError(f"window {list(window)} is empty for a {h}×{w} plane.", BAD_REQUEST)
    return values[r0:r1, c0:c1], [r0, r1, c0, c1]


def block_starts(n: int, m: int) -> np.ndarray:
    """The first item of each of ``m`` nearly equal blocks over ``n`` items (``block_mean``'s
    blocks); every block is non-empty because n > m."""
    return np.arange(n) if n <= m else (np.arange(m) * n) // m


def block_mean(values: np.ndarray, height: int, width: int) -> np.ndarray:
    """A 2-D array reduced by block means to at most ``height`` × ``width`` (float32).

    A block holding NaN stays NaN, so a bad value is never averaged away.
    """
    values = as_real(values)
    h, w = values.shape
    if h <= height and w <= width:
        return values.astype(np.float32)
    if values.dtype.kind != "f" or values.dtype.itemsize < 4:
        values = values.astype(np.float32)  # float16 sums overflow past 65504
    rows, cols = block_starts(h, height), block_starts(w, width)
    # Along rows first: contiguous memory, and in the input's precision (blocks are short);
    # the small partial sums are then added in float64. 10× faster than the other order.
    sums = np.add.reduceat(values, cols, axis=1).astype(np.float64)
    sums = np.add.reduceat(sums, rows, axis=0)
    counts = np.outer(np.diff(np.append(rows, h)), np.diff(np.append(cols, w)))
    return (sums / counts).astype(np.float32)


def as_real(values: np.ndarray) -> np.ndarray:
    """Numbers a picture can show: magnitudes of complex values, bools and ints as floats."""
    if np.iscomplexobj(values):
        return np.abs(values)
    if values.dtype.kind in "biu":
        return values.astype(np.float32)
    return values


def finite_range(values: np.ndarray) -> tuple[float | None, float | None]:
    """The smallest and largest finite values, or (None, None) when there are none."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None, None
    return float(finite.min()), float(finite.max())


def heatmap(
    array: np.ndarray,
    *,
    batch_dim: int | None,
    sample: int | None,
    index: Sequence[int],
    window: Sequence[int] | None,
    width: int,
    height: int,
) -> dict[str, Any]:
    """The ``view`` reply body for one stored array (see PROTOCOL.md)."""
    check_size(width, height)
    cut = plane(array, batch_dim, sample, index)
    values, used_window = crop(cut.values, window)
    small = block_mean(values, height, width)
    lo, hi = finite_range(small)
    return {
        "array": small,
        "lo": lo,
        "hi": hi,
        "shape": list(cut.values.shape),
        "window": used_window,
        "index": cut.index,
        "sample": cut.sample,
        "downsampled": small.shape != values.shape,
    }


def _channels_last(values: np.ndarray) -> np.ndarray:
    if values.ndim == 2:
        return values[:, :, None]
    if values.ndim != 3:
        raise AgentError(f"a tensor of shape {list(values.shape)} is not an image.", BAD_REQUEST)
    first, last = values.shape[0], values.shape[-1]
    # Tensors from torch are channels-first; PIL-style uint8 arrays are channels-last.
    if first in (1, 3) and (last not in (1, 3, 4) or values.dtype != np.uint8):
        return np.moveaxis(values, 0, -1)
    if last in (1, 3, 4):
        return values
    raise AgentError(f"a tensor of shape {list(values.shape)} is not an image.", BAD_REQUEST)


def _unnormalize(values: np.ndarray, normalize: Any) -> tuple[np.ndarray, bool]:
    if not isinstance(normalize, dict):
        return values, False
    try:
        mean = np.asarray(normalize["mean"], dtype=np.float64).reshape(-1)
        std = np.asarray(normalize["std"], dtype=np.float64).reshape(-1)
    except (KeyError, TypeError, ValueError):
        return values, False
    channels = values.shape[-1]
    if mean.size not in (1, channels) or std.size not in (1, channels):
        return values, False
    return values * std + mean, True


def picture(one_sample: np.ndarray, normalize: Any, width: int, height: int) -> dict[str, Any]:
    """The ``image`` reply body: one sample as uint8 pixels (h×w×3 or h×w), un-normalized
    with the recorded mean/std, shrunk by one factor on both axes to fit width × height."""
    check_size(width, height)
    values = _channels_last(np.abs(one_sample) if np.iscomplexobj(one_sample) else one_sample)
    normalized = False
    if values.dtype == np.uint8:
        scale = "uint8"
        pixels = values.astype(np.float64)
    else:
        pixels, normalized = _unnormalize(values.astype(np.float64), normalize)
        lo, hi = finite_range(pixels)
        if lo is not None and hi is not None and lo >= -0.05 and hi <= 1.05:
            scale, pixels = "unit", pixels * 255.0
        else:
            scale = "minmax"
            lo, hi = (0.0, 1.0) if lo is None or hi is None else (lo, hi)
            pixels = (pixels - lo) * (255.0 / (hi - lo if hi > lo else 1.0))
    pixels = pixels[..., :3]
    h, w = pixels.shape[:2]
    factor = max(-(-h // height), -(-w // width), 1)
    out_h, out_w = -(-h // factor), -(-w // factor)
    planes = [block_mean(pixels[..., c], out_h, out_w) for c in range(pixels.shape[-1])]
    image = np.stack(planes, axis=-1)
    image = np.clip(np.nan_to_num(image, nan=0.0), 0, 255).round().astype(np.uint8)
    if image.shape[-1] == 1:
        image = image[..., 0]
    return {"array": image, "normalized": normalized, "scale": scale, "shape": [h, w]}


def bounded(array: np.ndarray, max_elems: int, start: int = 0) -> dict[str, Any]:
    """At most ``max_elems`` raw values from row ``start`` on (along dim 0): whole rows when
    one fits, else the first values of that row flattened. ``truncated`` says whether any
    value was left out; ``next`` is the row to ask for next (None after the last)."""
    if max_elems < 1 or start < 0:
        raise AgentError("max_elems must be at least 1 and start at least 0.", BAD_REQUEST)
    if array.ndim == 0:
        return {"array": array, "truncated": False, "flat": False, "next": None}
    if start >= max(array.shape[0], 1):
        raise AgentError(f"start {start} is past the {array.shape[0]} stored rows.", BAD_REQUEST)
    row = int(np.prod(array.shape[1:], dtype=np.int64))
    if row > max_elems:
        values = array[start].reshape(-1)[:max_elems]
        rows, flat = 1, True
    else:
        rows, flat = max(max_elems // max(row, 1), 1), False
        values = array[start : start + rows]
    end = min(start + rows, array.shape[0])
    return {
        "array": values,
        "truncated": values.size < array.size,
        "flat": flat,
        "next": end if end < array.shape[0] else None,
    }
