"""What a caught value looks like in a frame, and how it is taken apart and put back together.

A caught value is a tree: containers (list, tuple, dict) whose leaves are arrays (torch tensors or
numpy arrays), scalars (bool, int, float, complex, None) or strings. The header describes the tree
as nested nodes; the payload holds the bytes of the array and string leaves back to back, in the
depth-first order the nodes list them, so no offsets travel and none can point anywhere wrong.

Nodes (msgpack maps)::

    {"kind": "tensor" | "ndarray", "dtype": "float32", "shape": [3, 4]}   bytes in the payload
    {"kind": "str", "nbytes": 5}                                         UTF-8 in the payload
    {"kind": "scalar", "dtype": "float", "value": 0.25}                  value in the header
    {"kind": "tree", "container": "list" | "tuple" | "dict", "items": [...], "keys": [...]}

A value the wire cannot carry (an unknown type, a float8 tensor, a cycle) travels as the string
``<not sent: why>`` so the session sees that something was caught and why it is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvis.live import tensors
from tvis.live.wire import FrameError

MAX_DEPTH = 16
"""Nesting bound for caught trees: deep enough for any real batch structure, shallow enough that
neither side can recurse into trouble."""

MAX_RANK = 32
"""Dimension bound for arrays: numpy's own limit is 64, and no tensor worth a heatmap comes close."""

MAX_DIM = 2**48
"""Largest size of one dimension: beyond any real tensor, far from numpy's index overflow (an
empty array of ``[0, 2**63]`` would otherwise pass the byte count and fail inside numpy)."""

_CONTAINERS = {list: "list", tuple: "tuple", dict: "dict"}
_SCALAR_KEYS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class Unsent:
    """A part of a caught value that could not be sent, and why."""

    reason: str

    def __str__(self) -> str:
        return f"<not sent: {self.reason}>"


@dataclass(frozen=True)
class Array:
    """An array leaf as received: its kind, its wire dtype and its bytes shaped as the array."""

    kind: str
    dtype: str
    data: np.ndarray

    def numeric(self) -> np.ndarray:
        """The values as a numpy array; bfloat16 becomes float32, which holds every bf16 exactly."""
        if self.dtype == "bfloat16":
            return (self.data.astype(np.uint32) << 16).view(np.float32)
        return self.data


# ---- training thread: take a private copy of the value, cheaply --------------------------------


def snapshot(obj: Any, buffers: tensors.HostBuffers, depth: int = 0) -> tuple[Any, int]:
    """A private host copy of ``obj`` for the send queue, and the bytes it holds.

    Tensors are detached and copied to contiguous CPU memory taken from ``buffers``, arrays
    copied, containers rebuilt, so later in-place changes by the training loop cannot reach
    what is sent.
    """
    if tensors.is_tensor(obj):
        if tensors.dtype_name(obj) not in tensors.WIRE_DTYPES:
            return Unsent(f"{tensors.dtype_name(obj)} tensors are not supported"), 0
        host = tensors.host_copy(obj, buffers)
        return host, host.numel() * host.element_size()
    if isinstance(obj, np.ndarray):
        if obj.dtype.name not in tensors.WIRE_DTYPES or obj.dtype.name == "bfloat16":
            return Unsent(f"{obj.dtype} arrays are not supported"), 0
        copy = np.array(obj, dtype=obj.dtype.newbyteorder("<"), order="C", copy=True)
        return copy, copy.nbytes
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, complex)):
        return obj, 0
    if isinstance(obj, str):
        return obj, len(obj)
    container = next((c for c in _CONTAINERS if isinstance(obj, c)), None)
    if container is None:
        return Unsent(f"{type(obj).__qualname__} is not a tensor, array, number or string"), 0
    if depth >= MAX_DEPTH:
        return Unsent(f"nested deeper than {MAX_DEPTH} levels"), 0
    if container is dict:
        items = [snapshot(v, buffers, depth + 1) for v in obj.values()]
        values = dict(zip(obj.keys(), (v for v, _ in items), strict=True))
    else:
        items = [snapshot(v, buffers, depth + 1) for v in obj]
        values = container(v for v, _ in items)
    return values, sum(n for _, n in items)


def release(snap: Any, buffers: tensors.HostBuffers) -> None:
    """Hand the tensors of a snapshot that is sent or dropped back to ``buffers``."""
    if tensors.is_tensor(snap):
        buffers.give_back(snap)
    elif isinstance(snap, (list, tuple)):
        for value in snap:
            release(value, buffers)
    elif isinstance(snap, dict):
        for value in snap.values():
            release(value, buffers)


# ---- sender thread: describe the snapshot and point at its bytes --------------------------------


def encode(snap: Any) -> tuple[dict, list[memoryview]]:
    """The header node describing ``snap`` and the payload buffers it refers to, in order."""
    buffers: list[memoryview] = []
    return _encode(snap, buffers), buffers


def _encode(snap: Any, buffers: list[memoryview]) -> dict:
    if tensors.is_tensor(snap):
        return _array_node("tensor", tensors.dtype_name(snap), tensors.tensor_array(snap), buffers)
    if isinstance(snap, np.ndarray):
        return _array_node("ndarray", snap.dtype.name, snap, buffers)
    if isinstance(snap, (str, Unsent)):
        data = str(snap).encode("utf-8", errors="replace")
        buffers.append(memoryview(data))
        return {"kind": "str", "nbytes": len(data)}
    container = _CONTAINERS.get(type(snap))
    if container is not None:
        node: dict = {"kind": "tree", "container": container}
        values = snap.values() if container == "dict" else snap
        node["items"] = [_encode(v, buffers) for v in values]
        if container == "dict":
            node["keys"] = [k if isinstance(k, _SCALAR_KEYS) else repr(k) for k in snap]
        return node
    return _scalar_node(snap)


def _array_node(kind: str, dtype: str, array: np.ndarray, buffers: list[memoryview]) -> dict:
    buffers.append(memoryview(array.reshape(-1).view(np.uint8)))
    return {"kind": kind, "dtype": dtype, "shape": list(array.shape)}


def _scalar_node(value: bool | int | float | complex | None) -> dict:
    if value is None:
        return {"kind": "scalar", "dtype": "none", "value": None}
    if isinstance(value, bool):
        return {"kind": "scalar", "dtype": "bool", "value": value}
    if isinstance(value, int):
        # msgpack ints stop at 64 bits; larger ones travel as their decimal digits.
        fits = -(2**63) <= value < 2**64
        return {"kind": "scalar", "dtype": "int", "value": value if fits else str(value)}
    if isinstance(value, complex):
        return {"kind": "scalar", "dtype": "complex", "value": [value.real, value.imag]}
    return {"kind": "scalar", "dtype": "float", "value": value}


# ---- receiving side: check every field, then view the payload ---------------------------------


def decode(node: dict, payload: np.ndarray) -> Any:
    """The value a catch header's node describes, its arrays viewing ``payload`` (no copy).

    Raises FrameError if the node is malformed or does not account for the payload exactly.
    """
    cursor = [0]
    value = _decode(node, payload, cursor, 0)
    if cursor[0] != payload.size:
        raise FrameError(f"payload has {payload.size - cursor[0]} bytes no leaf accounts for")
    return value


def _decode(node: Any, payload: np.ndarray, cursor: list[int], depth: int) -> Any:
    if not isinstance(node, dict):
        raise FrameError("a value node is not a map")
    kind = node.get("kind")
    if kind in ("tensor", "ndarray"):
        return _decode_array(kind, node, payload, cursor)
    if kind == "str":
        data = _take(payload, cursor, node.get("nbytes"))
        return data.tobytes().decode("utf-8", errors="replace")
    if kind == "scalar":
        return _decode_scalar(node)
    if kind == "tree" and depth < MAX_DEPTH:
        return _decode_tree(node, payload, cursor, depth)
    raise FrameError(f"unknown or too deeply nested node kind {kind!r}")


def _decode_array(kind: str, node: dict, payload: np.ndarray, cursor: list[int]) -> Array:
    dtype, shape = node.get("dtype"), node.get("shape")
    if dtype not in tensors.WIRE_DTYPES:
        raise FrameError(f"unsupported dtype {dtype!r}")
    if not (isinstance(shape, list) and len(shape) <= MAX_RANK):
        raise FrameError("shape is not a list of at most 32 sizes")
    if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM for d in shape):
        raise FrameError(f"shape holds something other than sizes up to {MAX_DIM}")
    wire = tensors.WIRE_DTYPES[dtype]
    data = _take(payload, cursor, math.prod(shape) * wire.itemsize)
    try:
        return Array(kind, dtype, data.view(wire).reshape(shape))
    except ValueError as exc:  # numpy's own bounds (an empty array with huge other sizes)
        raise FrameError(f"shape {shape} cannot be an array ({exc})") from None


def _take(payload: np.ndarray, cursor: list[int], nbytes: Any) -> np.ndarray:
    if not isinstance(nbytes, int) or nbytes < 0 or cursor[0] + nbytes > payload.size:
        raise FrameError("a leaf claims more bytes than the payload holds")
    start = cursor[0]
    cursor[0] += nbytes
    return payload[start : start + nbytes]


def _decode_scalar(node: dict) -> bool | int | float | complex | None:
    dtype, value = node.get("dtype"), node.get("value")
    if dtype == "none" and value is None:
        return None
    if dtype == "bool" and isinstance(value, bool):
        return value
    if dtype == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if dtype == "int" and isinstance(value, str) and value.lstrip("-").isdigit():
        try:
            return int(value)
        except ValueError:
            raise FrameError("integer has too many digits") from None
    if dtype == "float" and isinstance(value, float):
        return value
    if dtype == "complex" and isinstance(value, list) and len(value) == 2:
        if all(isinstance(v, float) for v in value):
            return complex(*value)
    raise FrameError(f"malformed {dtype!r} scalar")


def _decode_tree(node: dict, payload: np.ndarray, cursor: list[int], depth: int) -> Any:
    container, items = node.get("container"), node.get("items")
    if container not in ("list", "tuple", "dict") or not isinstance(items, list):
        raise FrameError("malformed tree node")
    values = [_decode(item, payload, cursor, depth + 1) for item in items]
    if container == "list":
        return values
    if container == "tuple":
        return tuple(values)
    keys = node.get("keys")
    if not (isinstance(keys, list) and len(keys) == len(values)):
        raise FrameError("dict node has keys that do not match its items")
    if not all(isinstance(k, _SCALAR_KEYS) for k in keys):
        raise FrameError("dict node has a key that is not a plain scalar")
    return dict(zip(keys, values, strict=True))
