"""The tensor-conversion edge: the only code in `tvis.live` that touches torch.

Sending never imports torch: an object can only be a torch tensor if the program already imported
torch, so `sys.modules` says whether to look. Receiving imports torch only when a session asks for
values and torch is installed; the server and the Live page work on numpy alone.
"""

from __future__ import annotations

import sys
import weakref
from functools import cache
from typing import Any

import numpy as np

from tvis.live import memory

# Wire dtype name -> numpy dtype of the bytes on the wire. bfloat16 has no numpy dtype, so its raw
# 16-bit patterns travel as uint16 and are reinterpreted on arrival.
WIRE_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(code)
    for name, code in {
        "float64": "<f8",
        "float32": "<f4",
        "float16": "<f2",
        "bfloat16": "<u2",
        "int64": "<i8",
        "int32": "<i4",
        "int16": "<i2",
        "int8": "i1",
        "uint64": "<u8",
        "uint32": "<u4",
        "uint16": "<u2",
        "uint8": "u1",
        "bool": "?",
        "complex128": "<c16",
        "complex64": "<c8",
    }.items()
}


def is_tensor(obj: object) -> bool:
    """Whether ``obj`` is a torch tensor (nn.Parameter included), without importing torch."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def dtype_name(tensor: Any) -> str:
    """A tensor's dtype as a wire name, e.g. ``float32`` for ``torch.float32``."""
    return str(tensor.dtype).removeprefix("torch.")


class HostBuffers:
    """Host memory for snapshots of large tensors, handed back after sending and reused.

    A fresh 64 MB buffer costs the training loop its page faults, several times the copy itself;
    a reused one costs only the copy.
    """

    def __init__(self, max_bytes: int = memory.POOL_BYTES) -> None:
        self._pool = memory.BufferPool(max_bytes)
        # Weak: a snapshot lost without being handed back (a catch that failed halfway) frees
        # its buffer as usual instead of pinning it here.
        self._lent: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()

    def empty(self, shape: Any, dtype: Any) -> Any:
        """An uninitialized contiguous CPU tensor of ``shape`` and ``dtype``."""
        torch = sys.modules["torch"]
        nbytes = shape.numel() * dtype.itemsize
        if nbytes < memory.POOL_MIN:
            return torch.empty(shape, dtype=dtype)
        buffer = self._pool.take(nbytes)
        self._lent[buffer.ctypes.data] = buffer
        return torch.from_numpy(buffer).view(dtype).view(shape)

    def give_back(self, host: Any) -> None:
        """Return a tensor made by `empty` once nothing reads it any more (others are ignored)."""
        buffer = self._lent.pop(host.data_ptr(), None)
        if buffer is not None:
            self._pool.give(buffer)


def host_copy(tensor: Any, buffers: HostBuffers) -> Any:
    """A contiguous CPU copy of ``tensor``, detached from autograd, whatever its device or strides.

    Always a copy, even on the CPU: the training loop goes on to change weights in place while
    the copy waits in the send queue.
    """
    torch = sys.modules["torch"]
    source = tensor.detach()
    if source.layout != torch.strided:
        source = source.to_dense()
    # copy_ into a fresh contiguous buffer reads any strides (and conj/neg views) in one pass.
    out = buffers.empty(source.shape, source.dtype)
    out.copy_(source)
    return out


def tensor_array(host: Any) -> np.ndarray:
    """The wire bytes of a contiguous CPU tensor as a numpy array sharing its memory."""
    torch = sys.modules["torch"]
    if host.dtype == torch.bfloat16:
        return host.view(torch.int16).numpy().view(np.uint16)
    return host.numpy()


@cache
def torch_available() -> bool:
    """Whether this session can hand tensors back as torch tensors."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def to_torch(array: np.ndarray, dtype: str) -> Any:
    """A torch tensor over ``array`` (the wire bytes of a leaf of wire dtype ``dtype``), no copy."""
    import torch

    if dtype == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)
