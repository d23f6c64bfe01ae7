"""The agent's wire format: length-prefixed msgpack frames, arrays as ``bin``, and errors.

A frame is a 4-byte big-endian length followed by one msgpack map of that many bytes.
Numpy arrays travel as ``{"__nd__": 1, "dtype", "shape", "data": bin}`` and come back as
read-only numpy arrays; nothing here unpickles or evaluates anything.

numpy is imported when the first array or numpy scalar crosses (the functions below):
`tvis tui` imports this module to start its agent before anything else, and that start
should not wait for numpy.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import msgpack

from tvis.store.printable import printable

if TYPE_CHECKING:
    import numpy as np

PROTOCOL_VERSION = 1

# A request is a method name and a few scalars; 1 MiB leaves room for long query strings
# while stopping a garbage length prefix from making the agent allocate gigabytes.
MAX_REQUEST_FRAME = 1 << 20
# A reply holds at most one bounded array (see api.MAX_ARRAY_BYTES) plus its record.
MAX_REPLY_FRAME = 64 << 20
# Objects (maps, arrays and their elements) one frame may decode into. msgpack spends a
# byte on an empty array that Python spends ~64 on, so a frame of nothing but empty arrays
# would cost 70x its size; counting what is built bounds that (about 70 bytes an object at
# worst: 64k objects are under 5 MB, 2M under 150 MB). A request is a method and a few
# scalars; a reply's largest structures are a page of 5,000 calls or a 256k-token
# vocabulary (a few hundred thousand objects), which 2M holds several times over.
MAX_REQUEST_OBJECTS = 1 << 16
MAX_REPLY_OBJECTS = 1 << 21
# Bytes a decoded object may cost in Python at most (an empty list: 56, plus its place in a
# list); what a queue of decoded requests is charged per object.
OBJECT_COST = 72
# While a request is pending, an agent whose client asked for it (``hello`` with
# ``heartbeat=True``) sends HEARTBEAT this often: silence on the link then means the link
# is dead (an ssh stopped, a network gone), not a busy agent.
HEARTBEAT_S = 0.5
HEARTBEAT = {"id": None, "alive": True}
# Arrays at least this large are written from where they lie instead of being packed.
STREAM_MIN = 64 << 10

HEADER = struct.Struct(">I")
ND_KEY = "__nd__"
# A length word with this bit set starts a data frame instead of a msgpack frame: the
# request id (DATA_ID) follows, then that many raw bytes. Frames never reach 2 GiB, so the
# bit is free, and a client that never asks for ``read`` never meets one.
DATA_FLAG = 1 << 31
DATA_ID = struct.Struct(">Q")
# One ``read`` answer: big enough that a request per chunk costs nothing next to moving
# it, small enough that a few in flight keep the ssh pipe full without hoarding memory.
MAX_READ = 16 << 20
# A pipe holds 64 KiB by default, so each 16 MiB chunk would wake both ends hundreds of
# times; 1 MiB is the most an unprivileged process may ask for on Linux.
PIPE_SIZE = 1 << 20

BAD_REQUEST, NOT_FOUND, VERSION_MISMATCH, AGENT_FAULT = 400, 404, 409, 500


class AgentError(Exception):
    """A request the agent answered with an error; ``status`` says what kind (400/404/409/500)."""

    def __init__(self, message: str, status: int = AGENT_FAULT) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def require_non_negative(**params: int | None) -> None:
    """Refuse a negative count, index or offset with one sentence naming the parameter."""
    for name, value in params.items():
        if value is not None and value < 0:
            raise AgentError(f"{name} must be 0 or more, not {value}.", BAD_REQUEST)


class ConnectionLost(AgentError):
    """The connection to the agent ended; no further calls will be answered."""

    def __init__(self, message: str) -> None:
        super().__init__(message, AGENT_FAULT)


class FrameTooLarge(Exception):
    """A length prefix above the receiver's limit; ``size`` bytes follow it on the stream."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a frame of {size} bytes exceeds the {limit}-byte limit")
        self.size = size
        self.limit = limit


class Truncated(Exception):
    """The stream ended in the middle of a frame."""


@dataclass(frozen=True)
class RawBytes:
    """A result that travels as a data frame: ``data`` goes from where it lies (a memory
    map of the blob) to the output without being packed or copied."""

    data: memoryview


def _wire_array(array: np.ndarray) -> tuple[dict[str, Any], memoryview | bytes]:
    """The ``__nd__`` fields of an array without its data, and the data itself."""
    if array.dtype.hasobject:
        raise TypeError("object arrays cannot travel")
    # (not ascontiguousarray: it turns 0-d arrays into 1-d ones)
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    fields = {ND_KEY: 1, "dtype": array.dtype.str, "shape": list(array.shape)}
    return fields, array.data.cast("B") if array.size else b""


def _default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, RawBytes):  # where a reply cannot go as a data frame
        return obj.data
    if isinstance(obj, np.ndarray):
        fields, data = _wire_array(obj)
        return {**fields, "data": data}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    raise TypeError(f"cannot encode {type(obj).__name__}")


def _array_hook(obj: dict) -> Any:
    if obj.get(ND_KEY) != 1:
        return obj
    import numpy as np

    try:
        dtype = np.dtype(obj["dtype"])
        shape = tuple(int(s) for s in obj["shape"])
        data = obj["data"]
        if dtype.hasobject or not isinstance(data, bytes):
            raise ValueError
        return np.frombuffer(data, dtype=dtype).reshape(shape)
    except (KeyError, TypeError, ValueError):
        raise ValueError("a malformed array in a frame") from None


def encode(obj: Any) -> bytes:
    """The msgpack body of ``obj`` (numpy arrays and scalars included)."""
    return msgpack.packb(obj, default=_default, use_bin_type=True)


class TooManyObjects(ValueError):
    """A frame that decodes into more objects than its bound allows."""


class _Budget:
    """Counts the objects a decode has built (each map and array when it closes, with its
    elements) and stops the decode once ``limit`` is passed, before more is allocated;
    with ``clean``, makes every string in them printable on the way."""

    def __init__(self, limit: int, arrays: bool, clean: bool) -> None:
        self.left = limit
        self.arrays = arrays
        self.clean = clean

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise TooManyObjects("a frame decodes into more objects than the protocol allows")

    def on_list(self, items: list) -> list:
        self.spend(len(items) + 1)
        if self.clean:
            for i, item in enumerate(items):
                if type(item) is str and not item.isprintable():
                    items[i] = printable(item)
        return items

    def on_map(self, obj: dict) -> Any:
        self.spend(2 * len(obj) + 1)
        if self.clean and not all(
            (type(v) is not str or v.isprintable()) and (type(k) is not str or k.isprintable())
            for k, v in obj.items()
        ):
            obj = {_printable(k): _printable(v) for k, v in obj.items()}
        return _array_hook(obj) if self.arrays else obj


def _printable(value: Any) -> Any:
    return printable(value) if type(value) is str else value


def decode(
    body: bytes | bytearray,
    *,
    arrays: bool = True,
    max_objects: int = MAX_REPLY_OBJECTS,
    clean: bool = False,
) -> Any:
    """The object in a msgpack body; with ``arrays`` the ``__nd__`` maps become arrays.

    At most ``max_objects`` objects are built (``TooManyObjects`` past that), and no single
    array, map, string or ``bin`` may declare more elements or bytes than that or the body
    holds, so a hostile frame costs bounded memory however it is nested. With ``clean``
    (what clients do with replies) control characters in strings are made visible
    (``tvis.store.printable``), so nothing an agent says can drive the user's terminal."""
    return decode_counted(body, arrays=arrays, max_objects=max_objects, clean=clean)[0]


def decode_counted(
    body: bytes | bytearray,
    *,
    arrays: bool = True,
    max_objects: int = MAX_REPLY_OBJECTS,
    clean: bool = False,
) -> tuple[Any, int]:
    """``decode``, and how many objects the maps and arrays in it hold."""
    budget = _Budget(max_objects, arrays, clean)
    size = len(body)
    obj = msgpack.unpackb(
        body,
        raw=False,
        strict_map_key=False,
        object_hook=budget.on_map,
        list_hook=budget.on_list,
        max_array_len=min(size, max_objects),
        max_map_len=min(size, max_objects),
        max_str_len=size,
        max_bin_len=size,
        max_ext_len=size,
    )
    return obj, max_objects - budget.left


def frame(body: bytes) -> bytes:
    """``body`` with its length prefix."""
    return HEADER.pack(len(body)) + body


class Readable(Protocol):
    """What frames are read from: a pipe's raw file, a socket's file, a watched stream."""

    def read(self, n: int, /) -> bytes | None: ...

    def readinto(self, buffer: memoryview, /) -> int | None: ...


def read_exact(stream: Readable, n: int) -> bytes | bytearray:
    """Exactly ``n`` bytes, ``b""`` at a clean end of stream, or ``Truncated``."""
    # One buffer filled in place: a 48 MiB reply is copied once here, not chunk by chunk.
    buffer = bytearray(n)
    view, got = memoryview(buffer), 0
    while got < n:
        count = stream.readinto(view[got:])
        if not count:
            if got == 0:
                return b""
            raise Truncated(f"the stream ended {n - got} bytes short of a frame")
        got += count
    return buffer


def read_into(stream: Readable, view: memoryview) -> None:
    """Fill ``view`` from ``stream`` (no buffer in between), or raise ``Truncated``."""
    got, n = 0, len(view)
    while got < n:
        count = stream.readinto(view[got:])
        if not count:
            raise Truncated(f"the stream ended {n - got} bytes short of a data frame")
        got += count


def widen_pipe(fd: int) -> None:
    """Give the pipe at ``fd`` a ``PIPE_SIZE`` buffer where the system allows; else nothing."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
    except (ImportError, OSError, ValueError):
        pass  # not Linux, not a pipe, or above the system's limit: the default still works


def data_header(request_id: int, size: int) -> bytes:
    """The length word and id that start a data frame of ``size`` bytes."""
    return HEADER.pack(DATA_FLAG | size) + DATA_ID.pack(request_id)


def read_length(stream: Readable) -> int | None:
    """The next length word (``DATA_FLAG`` included), or None at a clean end of stream."""
    header = read_exact(stream, HEADER.size)
    if not header:
        return None
    return HEADER.unpack(header)[0]


def read_body(stream: Readable, size: int, limit: int) -> bytes | bytearray:
    """The ``size`` bytes of a msgpack frame; ``FrameTooLarge`` (left unread) or ``Truncated``."""
    if size > limit:
        raise FrameTooLarge(size, limit)
    body = read_exact(stream, size)
    if len(body) != size:
        raise Truncated("the stream ended right after a frame header")
    return body


def read_frame(stream: Readable, limit: int) -> bytes | bytearray | None:
    """The next frame's body, or None at a clean end of stream.

    Raises ``FrameTooLarge`` (leaving the oversized body unread) or ``Truncated``.
    """
    size = read_length(stream)
    return None if size is None else read_body(stream, size, limit)


def skip(stream: Readable, size: int, chunk: int = 1 << 20) -> bool:
    """Discard ``size`` bytes without holding them; False if the stream ended first."""
    while size > 0:
        data = stream.read(min(chunk, size))
        if not data:
            return False
        size -= len(data)
    return True


def mismatch_message(
    local_version: str, local_protocol: int, host: str, remote_version: str, remote_protocol: int
) -> str:
    """The sentence for a viewer and an agent that speak different protocol versions."""
    return (
        f"this machine has tvis {local_version} (protocol {local_protocol}), {host} has tvis "
        f"{remote_version} (protocol {remote_protocol}); upgrade one of them."
    )


def _bin_header(size: int) -> bytes:
    if size < 1 << 8:
        return struct.pack(">BB", 0xC4, size)
    if size < 1 << 16:
        return struct.pack(">BH", 0xC5, size)
    return struct.pack(">BI", 0xC6, size)


def _parts(reply: dict[str, Any]) -> list[bytes | memoryview]:
    import numpy as np

    packer = msgpack.Packer(default=_default, use_bin_type=True)
    result = reply.get("result")
    if set(reply) != {"id", "result"} or not isinstance(result, dict):
        return [packer.pack(reply)]
    parts: list[bytes | memoryview] = [
        packer.pack_map_header(2) + packer.pack("id") + packer.pack(reply["id"]),
        packer.pack("result") + packer.pack_map_header(len(result)),
    ]
    for key, value in result.items():
        parts.append(packer.pack(key))
        if isinstance(value, np.ndarray) and value.nbytes >= STREAM_MIN:
            fields, data = _wire_array(value)
            head = b"".join(packer.pack(k) + packer.pack(v) for k, v in fields.items())
            parts += [
                packer.pack_map_header(len(fields) + 1) + head,
                packer.pack("data") + _bin_header(len(data)),
                data,
            ]
        else:
            parts.append(packer.pack(value))
    return parts


def reply_parts(reply: dict[str, Any]) -> list[bytes | memoryview]:
    """The msgpack body of a reply map, in pieces that add up to one msgpack map.

    Large arrays at the top level of a result are referenced, not copied: a 48 MiB page
    of a memory-mapped tensor goes from the page cache to the pipe without a buffer in
    between. A reply that cannot be encoded or exceeds the frame limit becomes an error
    reply with the same id.
    """
    try:
        parts = _parts(reply)
    except Exception as e:
        return [encode(_fault(reply, f"the agent could not encode its reply ({e})."))]
    size = sum(len(p) for p in parts)
    if size > MAX_REPLY_FRAME:
        message = f"the reply of {size} bytes exceeds the frame limit; ask for less."
        return [encode(_fault(reply, message))]
    return parts


def reply_frame(reply: dict[str, Any]) -> list[bytes | memoryview]:
    """A whole reply frame in pieces, length word included: a data frame for a
    ``RawBytes`` result, else a msgpack frame (see ``reply_parts``)."""
    result = reply.get("result")
    if isinstance(result, RawBytes) and isinstance(reply.get("id"), int):
        return [data_header(reply["id"], len(result.data)), result.data]
    parts = reply_parts(reply)
    return [HEADER.pack(sum(len(p) for p in parts)), *parts]


def reply_body(reply: dict[str, Any]) -> bytes:
    """The msgpack body of a reply map in one piece (see ``reply_parts``)."""
    return b"".join(reply_parts(reply))


def _fault(reply: dict[str, Any], message: str) -> dict[str, Any]:
    return {"id": reply.get("id"), "error": message, "status": AGENT_FAULT}


def result_of(reply: Any) -> Any:
    """The result of a reply map, or the ``AgentError`` it carries raised."""
    if not isinstance(reply, dict):
        raise AgentError("the agent sent a reply that is not a map.", AGENT_FAULT)
    if "error" in reply:
        status = reply.get("status")
        raise AgentError(str(reply["error"]), status if isinstance(status, int) else AGENT_FAULT)
    return reply.get("result")
