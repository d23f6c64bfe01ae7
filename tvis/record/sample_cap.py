"""Fewer kept samples in a batch whose samples are huge.

``--samples`` values are kept of every activation and gradient, but one sample of a big
vision model at full resolution is tens of MB (ResNet-18 at 224×224: 60 MB raw, forward
and backward), and a three-step run would be hundreds of MB for pictures of the same
kind. When a batch's kept samples come to more than BATCH_VALUES_BYTES, it keeps as many
as fit (at least one): the builder cuts them as soon as its captures pass the cap (so the
batch never holds all of them at once), and the session checks again when it is handed to
the writer; statistics still describe every tensor whole, and per-sample losses and
Grad-CAM maps still cover the whole batch.
"""

from __future__ import annotations

import numpy as np

from tvis.store import host_memory

# Raw bytes of kept per-sample values a batch may hold: three samples of a small model,
# one of a ResNet-18 at 224×224.
BATCH_VALUES_BYTES = 48 << 20


def samples_that_fit(entries: list[dict], arrays: dict[int, np.ndarray], samples: int) -> int:
    """How many samples a batch keeps of the ``samples`` it captured."""
    per_sample = 0.0
    for entry in entries:
        array = arrays.get(entry["id"])
        if array is not None:
            per_sample += sample_bytes(entry, array)
    return samples_within(per_sample, samples)


def sample_bytes(entry: dict, array: np.ndarray) -> float:
    """Bytes one sample takes of ``entry``'s kept value ``array`` (0 when it is not kept
    per sample)."""
    if _cuttable(entry, array) is None:
        return 0.0
    return array.nbytes / _rows_kept(entry, array) * _span(entry)


def samples_within(per_sample: float, samples: int) -> int:
    """Samples of ``per_sample`` bytes each that fit in BATCH_VALUES_BYTES (at least one;
    ``samples`` at most)."""
    if samples <= 1 or per_sample * samples <= BATCH_VALUES_BYTES:
        return samples
    return max(1, int(BATCH_VALUES_BYTES // per_sample))


def cut(entries: list[dict], arrays: dict[int, np.ndarray], samples: int) -> int:
    """Keep the values of the first ``samples`` samples only; returns the bytes freed."""
    freed = 0
    for entry in entries:
        array = arrays.get(entry["id"])
        dim = _cuttable(entry, array) if array is not None else None
        rows = samples * _span(entry)
        if dim is None or array.shape[dim] <= rows:
            continue
        shape = (*array.shape[:dim], rows, *array.shape[dim + 1 :])
        kept = np.take(array, np.arange(rows), axis=dim, out=host_memory.empty(shape, array.dtype))
        freed += array.nbytes - kept.nbytes
        arrays[entry["id"]] = kept
        entry["value"]["count"] = samples
    return freed


def _cuttable(entry: dict, array: np.ndarray) -> int | None:
    """The batch dim of a value kept per sample with its full shape, else None."""
    value = entry.get("value") or {}
    dim = entry.get("batch_dim")
    if value.get("kept") != "samples" or not isinstance(dim, int):
        return None
    if array.ndim != len(entry.get("shape") or ()) or dim >= array.ndim:
        return None  # cut further to a flat prefix: left as it is
    return dim


def _span(entry: dict) -> int:
    return int(entry.get("batch_span") or 1)


def _rows_kept(entry: dict, array: np.ndarray) -> int:
    return max(int(array.shape[entry["batch_dim"]]), 1)
