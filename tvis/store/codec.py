"""Exact, compact encoding of stored arrays: bit-level XOR deltas, byte shuffling, zstd.

A float array compresses poorly as it lies in memory (sign, exponent and mantissa bytes
interleave), and a parameter before and after one optimizer step differs mostly in its
low mantissa bits. So an array is stored as the XOR of its bit pattern with a base array
of the same shape (or alone), its bytes regrouped by significance ("shuffled": every
element's first byte, then every second byte, ...), then zstd-compressed. Every step is
lossless: decoding gives back the same bits. Needs numpy and zstandard only (no torch),
so the agent reads what the recorder wrote.
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass

import numpy as np
import zstandard

# The codec name stored in a value record (format.py).
CODEC = "zstd-shuffle"

# zstd level 1: compresses a shuffled float array about as well as the slow levels do
# (mantissa bytes are noise at any level), at several hundred MB/s on one core.
LEVEL = 1


# One compressor and one decompressor per thread: making a zstd context costs more than
# compressing a small parameter (a bias, a norm's weight) with it, and a context must
# not be shared between threads.
_CONTEXTS = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    c = getattr(_CONTEXTS, "compressor", None)
    if c is None:
        c = _CONTEXTS.compressor = zstandard.ZstdCompressor(level=LEVEL)
    return c


def _decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_CONTEXTS, "decompressor", None)
    if d is None:
        d = _CONTEXTS.decompressor = zstandard.ZstdDecompressor()
    return d


@dataclass(frozen=True)
class Encoded:
    """An array ready for the blob: its compressed bytes and what the reader needs."""

    payload: bytes
    dtype: np.dtype
    shape: tuple[int, ...]
    raw_nbytes: int
    crc32: int  # of the decoded bits (after any XOR with the base)

    @property
    def nbytes(self) -> int:
        return len(self.payload)


def bits(array: np.ndarray) -> np.ndarray:
    """The bit pattern of ``array`` as unsigned integers of its item size (flat)."""
    flat = np.ascontiguousarray(array).reshape(-1)
    size = flat.dtype.itemsize
    if size in (1, 2, 4, 8):
        return flat.view(f"<u{size}")
    return flat.view("<u8")  # complex128 and the like: two words per element


def checksum(array: np.ndarray) -> int:
    return zlib.crc32(bits(array).data.cast("B"))


def encode(array: np.ndarray, base: np.ndarray | None = None) -> Encoded:
    """``array`` compressed, as an XOR against ``base`` when given (same shape and dtype)."""
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    word = bits(array)
    crc = zlib.crc32(word.data.cast("B"))
    if base is not None:
        word = np.bitwise_xor(word, bits(base))
    payload = _compressor().compress(_shuffle(word).data)
    return Encoded(payload, array.dtype, tuple(array.shape), array.nbytes, crc)


def decode(
    payload: bytes | memoryview,
    dtype: np.dtype,
    shape: tuple[int, ...],
    base: np.ndarray | None = None,
    crc32: int | None = None,
) -> np.ndarray:
    """The array ``encode`` was given; ValueError when the bytes or the base do not match."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw_nbytes = count * dtype.itemsize
    try:
        raw = _decompressor().decompress(payload, max_output_size=raw_nbytes)
    except zstandard.ZstdError as e:
        raise ValueError(f"the compressed values are corrupt ({e})") from None
    if len(raw) != raw_nbytes:
        raise ValueError("the compressed values have the wrong length")
    word_size = dtype.itemsize if dtype.itemsize in (1, 2, 4, 8) else 8
    word = _unshuffle(raw, word_size)
    if base is not None:
        if base.shape != tuple(shape):
            raise ValueError("the base of an XOR delta has another shape")
        np.bitwise_xor(word, bits(base), out=word)
    if crc32 is not None and zlib.crc32(word.data.cast("B")) != crc32:
        raise ValueError("the decoded values fail their checksum")
    return word.view(dtype).reshape(shape)


def _shuffle(word: np.ndarray) -> np.ndarray:
    """The bytes of ``word`` regrouped by significance, as one contiguous array that zstd
    reads in place (no ``tobytes`` copy)."""
    size = word.dtype.itemsize
    if size == 1:
        return word
    by_element = word.view(np.uint8).reshape(-1, size)
    planes = np.empty((size, len(by_element)), np.uint8)
    # One byte plane at a time: a third faster than numpy's transposed copy of the whole.
    for k in range(size):
        planes[k] = by_element[:, k]
    return planes


def _unshuffle(raw: bytes, size: int) -> np.ndarray:
    planes = np.frombuffer(raw, dtype=np.uint8)
    if size == 1:
        return planes.copy()
    # Into a new array (never a view of the read-only ``raw``, which the XOR with a base
    # writes into), one byte plane at a time: three times faster than numpy's transposed
    # copy of the whole.
    planes = planes.reshape(size, -1)
    words = np.empty((planes.shape[1], size), np.uint8)
    for k in range(size):
        words[:, k] = planes[k]
    return words.reshape(-1).view(f"<u{size}")
