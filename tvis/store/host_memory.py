"""Large arrays of tvis's own, kept outside the malloc heap the training script uses.

tvis holds a batch's kept values from the forward that makes them until the writer has
encoded them. Allocated with malloc they lie between the script's activations, which
die at each backward: the heap cannot shrink past a live block, so every kept value pins
the freed activations below it and the process keeps them (a 12-layer GPT recorded held
about 340 MB of freed memory so, at a peak 1.37× plain). An array of at least
``MMAP_BYTES`` gets an anonymous mapping of its own instead: the OS takes it back the
moment the array dies, and the script's heap never sees it.
"""

from __future__ import annotations

import math
import mmap

import numpy as np

# Smaller arrays come from numpy's allocator: a mapping per array costs a system call
# and its page faults, which only pays for large ones.
MMAP_BYTES = 1 << 20

_FLAGS = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)


def empty(shape: tuple[int, ...], dtype: np.dtype | type | str) -> np.ndarray:
    """An uninitialised C-contiguous array, mapped on its own when it is large."""
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes < MMAP_BYTES or not _FLAGS:
        return np.empty(shape, dtype)
    # Started on a huge page boundary and advised as huge pages where whole ones fit:
    # a fresh mapping is faulted in at 2 MB a time rather than 4 KB (half the cost).
    buffer = mmap.mmap(-1, nbytes + _HUGE, flags=_FLAGS)
    start = -_address(buffer) % _HUGE
    whole = nbytes // _HUGE * _HUGE
    if whole and _ADVICE is not None:
        buffer.madvise(_ADVICE, start, whole)
    return np.frombuffer(buffer, dtype, count, start).reshape(shape)


def mapping(array: np.ndarray) -> mmap.mmap | None:
    """The mapping of ``empty`` that holds ``array``'s memory, if one does."""
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # what numpy.frombuffer keeps of the mapping
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


_HUGE = 2 << 20
_ADVICE = getattr(mmap, "MADV_HUGEPAGE", None)


def _address(buffer: mmap.mmap) -> int:
    return np.frombuffer(buffer, np.uint8, 1).ctypes.data
