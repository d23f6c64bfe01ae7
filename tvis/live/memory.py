"""Large host buffers: allocated so that filling them is cheap, and reused when handed back.

Filling fresh memory costs a fault per 4 KiB page, and numpy's own large allocations ask for
huge pages, which makes the kernel compact memory on the spot once much of it is held (a
receiving server holds its whole history). Measured on a 2-core VM for 64 MB kept: np.empty +
fill ≈ 200 ms, bytearray ≈ 100 ms, an mmap populated up front ≈ 67 ms, a reused buffer ≈ 0.
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable

import numpy as np

POOL_MIN = 1024**2
"""Smallest buffer worth pooling or pre-mapping: below a megabyte the allocator's own reuse wins."""

POOL_BYTES = 256 * 1024**2
"""Default idle bytes a pool keeps: a few copies of a large weight, enough for a steady stream
of big tensors to run on reused memory, little next to what the stream itself holds."""

_POPULATE = getattr(mmap, "MAP_POPULATE", 0)

# madvise(MADV_POPULATE_WRITE) (Linux 5.14): fault in a range of a mapping at once, as
# MAP_POPULATE does for the whole of it; Python 3.11's mmap module does not name it yet.
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)


def empty(nbytes: int) -> np.ndarray:
    """A new writable uint8 array of ``nbytes`` uninitialized (or zeroed) bytes."""
    if nbytes < POOL_MIN or not _POPULATE:
        return np.empty(nbytes, dtype=np.uint8)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=flags), dtype=np.uint8)


def lazy(nbytes: int) -> np.ndarray:
    """A writable uint8 array whose memory is committed only as it is written (or
    ``populate``d): a peer that declares a large payload and sends little costs little."""
    if nbytes < POOL_MIN or not _POPULATE:
        return np.empty(nbytes, dtype=np.uint8)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=flags), dtype=np.uint8)


def populate(array: np.ndarray, start: int, stop: int) -> None:
    """Commit bytes ``start:stop`` of a ``lazy`` array in one go (cheaper than a fault per
    page while receiving into it); a no-op for other arrays or kernels without it."""
    view = array.base
    mapping = view.obj if isinstance(view, memoryview) else None
    if not isinstance(mapping, mmap.mmap):
        return
    start -= start % mmap.PAGESIZE
    try:
        mapping.madvise(_MADV_POPULATE_WRITE, start, stop - start)
    except (OSError, ValueError):
        pass  # faulted in page by page instead


class BufferPool:
    """uint8 buffers of one megabyte or more, handed back when no longer read and lent again
    for the same size; up to ``max_bytes`` of them wait idle, the rest are freed."""

    def __init__(self, max_bytes: int = POOL_BYTES, fresh: Callable[[int], np.ndarray] = empty):
        self.max_bytes = max_bytes
        self._fresh = fresh  # how a buffer is made when none waits: ``empty`` or ``lazy``
        self._free: dict[int, list[np.ndarray]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        """A buffer of ``nbytes``: a returned one if there is one, else a fresh one."""
        if nbytes >= POOL_MIN:
            with self._lock:
                free = self._free.get(nbytes)
                if free:
                    self._bytes -= nbytes
                    return free.pop()
        return self._fresh(nbytes)

    def give(self, buffer: np.ndarray) -> None:
        """Hand back a buffer from `take` that nothing will read or write again."""
        if buffer.nbytes < POOL_MIN:
            return
        with self._lock:
            if self._bytes + buffer.nbytes <= self.max_bytes:
                self._free.setdefault(buffer.nbytes, []).append(buffer)
                self._bytes += buffer.nbytes
