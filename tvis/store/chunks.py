"""Activations and gradients stored compressed in chunks, read back a chunk at a time.

An array is cut, in C order, into chunks of whole trailing planes (a channel of an NCHW
activation, a block of rows of a matrix) of about CHUNK_BYTES each, and every chunk is
compressed on its own with Blosc: bytes regrouped by significance (shuffle), then zstd.
A view reads only the chunks holding what it shows: one channel of a sample smaller than a
chunk lies in one.
``ChunkedArray`` is what the reader hands out for such a value: it behaves as a read-only
numpy array, decoding on indexing only the chunks the index touches, and decoding the
whole array only when used whole (``np.asarray``, arithmetic, any other method). It is a
``LazyArray``: an array that makes only the flat runs of elements an index needs
(``derived.DerivedArray``, a value rebuilt from stored neighbours, is the other).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

# The codec name stored in a value record (format.py).
CODEC = "blosc-zstd-chunks"

# Raw bytes per chunk: a channel of a 112×112 float32 activation is 49 KiB, one of 56×56
# 12 KiB (a chunk holds five): a view of one channel decodes little more than the channel.
CHUNK_BYTES = 64 << 10


@functools.cache
def codecs() -> tuple[Any, Any]:
    """Blosc shuffling by byte, and by bit. numcodecs is imported at the first call, not with
    this module: its import (≈ 60 ms, most of it reading every installed package's entry
    points) is then off the start of the agent, which answers the viewer's hello, runs and
    run without it and loads it on a thread meanwhile (``tvis agent --stdio``)."""
    from numcodecs import Blosc

    # zstd level 1: the mantissa bytes of floats are noise at any level, and level 1 keeps
    # the writer thread ahead of training.
    by_byte = Blosc(cname="zstd", clevel=1, shuffle=Blosc.SHUFFLE)
    # Values rounded to fewer mantissa bits (rounding.py) have whole bit planes of zeros:
    # shuffled by bit they take 7 % less than by byte (a ResNet-18 batch at 10 bits), and
    # decode as fast. A Blosc frame says how it was shuffled, so one decoder reads both.
    by_bit = Blosc(cname="zstd", clevel=1, shuffle=Blosc.BITSHUFFLE)
    return by_byte, by_bit


# A read of many chunks (a whole array, an export's range) decodes them on every core:
# Blosc decodes without the GIL on threads other than the main one.
PARALLEL_FROM = 8  # chunks
_POOL = ThreadPoolExecutor(
    max_workers=min(os.cpu_count() or 1, 8), thread_name_prefix="tvis-chunks"
)


def chunk_elems(shape: tuple[int, ...], itemsize: int) -> int:
    """Elements per chunk: the most whole trailing planes that fit in CHUNK_BYTES (at
    least one plane; a plane bigger than that is cut into runs of whole rows or elements)."""
    limit = max(CHUNK_BYTES // max(itemsize, 1), 1)
    plane = 1
    for dim in reversed(shape):
        if plane * dim > limit:
            break
        plane *= dim
    return plane * max(limit // plane, 1)


@dataclass(frozen=True)
class Chunked:
    """An array ready for the blob: its chunks, compressed, one after another."""

    payload: list[bytes]
    dtype: np.dtype
    shape: tuple[int, ...]
    chunk: int  # elements per chunk (the last may hold fewer)

    @property
    def nbytes(self) -> int:
        return sum(len(p) for p in self.payload)

    @property
    def sizes(self) -> list[int]:
        return [len(p) for p in self.payload]


def compress(array: np.ndarray, rounded: bool = False) -> Chunked:
    """``array`` (contiguous, little-endian, numeric) cut into chunks and compressed;
    ``rounded``: its floats were rounded to fewer mantissa bits."""
    flat = array.reshape(-1)
    chunk = chunk_elems(array.shape, array.itemsize)
    by_byte, by_bit = codecs()
    codec = by_bit if rounded else by_byte
    payload = [codec.encode(flat[i : i + chunk]) for i in range(0, flat.size, chunk)]
    return Chunked(payload, array.dtype, tuple(array.shape), chunk)


class LazyArray(NDArrayOperatorsMixin):
    """A read-only array of ``dtype`` and ``shape`` whose elements are made on demand by
    ``_elements(start, stop)`` (flat, C order): indexing with ints and slices asks only
    for the run of elements the index spans."""

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape)

    def _elements(self, start: int, stop: int) -> np.ndarray:
        raise NotImplementedError

    # -- what numpy asks of an array ------------------------------------------------------

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype})"

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self._elements(0, self.size).reshape(self.shape)
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(np.asarray(x) if isinstance(x, LazyArray) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Any other ndarray method or attribute works on the whole array, decoded.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(np.asarray(self), name)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, key: Any) -> Any:
        box = self._box(key)
        if box is None:  # advanced indexing, Ellipsis, newaxis: on the decoded whole
            return np.asarray(self)[key]
        lows, extents, local = box
        if 0 in extents:  # selects nothing: the right shape, no decoding
            return np.broadcast_to(np.zeros((), self.dtype), self.shape)[key].copy()
        strides = _c_strides(self.shape)
        first = sum(lo * s for lo, s in zip(lows, strides, strict=True))
        last = first + sum((e - 1) * s for e, s in zip(extents, strides, strict=True))
        values = self._elements(first, last + 1)
        window = np.lib.stride_tricks.as_strided(
            values,
            shape=extents,
            strides=tuple(s * self.dtype.itemsize for s in strides),
            writeable=False,
        )
        return window[local]

    # -- reading ---------------------------------------------------------------------------

    def byte_range(self, offset: int, length: int) -> np.ndarray:
        """Bytes ``offset`` to ``offset + length`` of the values in C order, as uint8."""
        size = self.dtype.itemsize
        end = min(offset + length, self.nbytes)
        if end <= offset:
            return np.empty(0, np.uint8)
        first, last = offset // size, -(-end // size)
        raw = self._elements(first, last).view(np.uint8)
        return raw[offset - first * size : end - first * size]

    def _box(self, key: Any) -> tuple[list[int], tuple[int, ...], tuple] | None:
        """For a key of ints and slices: the first index and the extent of the box it
        selects along each dim, and the key within that box; None for any other key."""
        key = key if isinstance(key, tuple) else (key,)
        if len(key) > self.ndim:
            return None
        lows: list[int] = []
        extents: list[int] = []
        local: list[int | slice] = []
        for dim, n in enumerate(self.shape):
            k = key[dim] if dim < len(key) else slice(None)
            if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                i = int(k) + n if k < 0 else int(k)
                if not 0 <= i < n:
                    raise IndexError(
                        f"index {int(k)} is out of bounds for axis {dim} with size {n}"
                    )
                lows.append(i)
                extents.append(1)
                local.append(0)
            elif isinstance(k, slice):
                r = range(*k.indices(n))
                if not r:
                    lows.append(0)
                    extents.append(0)
                    local.append(k)
                    continue
                lo = min(r[0], r[-1])
                lows.append(lo)
                extents.append(max(r[0], r[-1]) - lo + 1)
                stop = r.stop - lo
                local.append(slice(r.start - lo, stop if stop >= 0 else None, r.step))
            else:
                return None
        return lows, tuple(extents), tuple(local)


class ChunkedArray(LazyArray):
    """A read-only array whose values lie compressed in chunks of a blob."""

    def __init__(
        self,
        blob: Any,
        offset: int,
        sizes: Sequence[int] | np.ndarray,
        chunk: int,
        dtype: np.dtype,
        shape: tuple[int, ...],
        fail: Callable[[str], Exception] = ValueError,
    ) -> None:
        super().__init__(dtype, shape)
        # ``fail(why)`` is the exception raised for a chunk that does not decode.
        self._blob, self._chunk, self._fail = blob, chunk, fail
        self._starts = np.concatenate([[offset], offset + np.cumsum(sizes, dtype=np.int64)])

    def _elements(self, start: int, stop: int) -> np.ndarray:
        """Flat elements ``start`` to ``stop``, decoding only the chunks that hold them."""
        out = np.empty(stop - start, self.dtype)
        if stop <= start:
            return out
        chunk = self._chunk
        first, last = start // chunk, (stop - 1) // chunk
        if first == last:
            decoded = self._decode(first)
            out[:] = decoded[start - first * chunk : stop - first * chunk]
            return out

        def place(i: int) -> None:
            lo, hi = max(i * chunk, start), min((i + 1) * chunk, stop)
            if lo == i * chunk and hi == min((i + 1) * chunk, self.size):
                self._decode(i, out[lo - start : hi - start])  # straight into place
            else:
                out[lo - start : hi - start] = self._decode(i)[lo - i * chunk : hi - i * chunk]

        if last - first + 1 < PARALLEL_FROM:
            for i in range(first, last + 1):
                place(i)
        else:  # each chunk lands in its own slice of ``out``
            list(_POOL.map(place, range(first, last + 1)))
        return out

    def _decode(self, i: int, into: np.ndarray | None = None) -> np.ndarray:
        count = min(self._chunk, self.size - i * self._chunk)
        if into is None:
            into = np.empty(count, self.dtype)
        start, end = int(self._starts[i]), int(self._starts[i + 1])
        if end > len(self._blob):
            raise self._fail("they are truncated")
        try:
            codecs()[0].decode(memoryview(self._blob)[start:end], out=into)
        except (RuntimeError, ValueError) as e:
            raise self._fail(f"chunk {i} does not decode: {e}") from None
        return into


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a C-ordered array of ``shape``."""
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))
