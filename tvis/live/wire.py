"""The live wire format: how one frame is laid out on a TCP stream, and how it is read back.

A frame is::

    >I      header length (big-endian uint32)
    header  a msgpack map (plain data only; nothing is ever pickled or evaluated)
    >Q      payload length (big-endian uint64)
    payload the raw contiguous little-endian bytes of every array or string leaf, back to back

A connection opens with a hello frame from the sender (protocol version, token, sender identity)
and the server's reply frame (``{"ok": True}`` or ``{"ok": False, "error": ...}``); every later
frame on it is one catch. What a catch's header holds is `codec`'s business.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

import msgpack
import numpy as np

from tvis.live import memory

PROTOCOL = 1
HEADER_LEN = struct.Struct(">I")
PAYLOAD_LEN = struct.Struct(">Q")

MAX_HEADER = 64 * 1024
"""Default header bound: a header describes one catch (names, shapes, a tree of descriptors); 64 KiB
holds trees of hundreds of leaves while keeping a hostile peer from making the server buffer more."""

MAX_PAYLOAD = 2 * 1024**3
"""Default payload bound: 2 GiB is a 1B-parameter bf16 weight, larger than anything worth
inspecting interactively and small enough that one frame cannot exhaust a laptop's memory."""

OBJECT_COST = 72
"""Bytes a decoded header object may cost (an empty list: 56, plus its slot)."""

RECV_CHUNK = 16 * 1024 * 1024
"""Bytes asked of one recv call: large enough that syscall overhead vanishes next to the copy."""

RATE_WINDOW = 10.0
"""Seconds over which a payload in progress must deliver MIN_WINDOW_BYTES."""

MIN_WINDOW_BYTES = 256 * 1024
"""Bytes a payload in progress must deliver in every RATE_WINDOW (25 KB/s, far below any link
that carries tensors): a peer that trickles a byte now and then is dropped, so it cannot keep
the bytes-in-flight budget from real senders for long."""

FIRST_WINDOW = 1024 * 1024
"""Payload bytes committed before any has arrived; each later window is as large as what has
arrived so far (up to RECV_CHUNK), so memory follows the bytes a peer really sends, not the size
it declares."""


class FrameError(Exception):
    """A frame breaks the format or its bounds; the connection that sent it is dropped."""


def pack(header: dict, payload_len: int = 0) -> bytes:
    """The bytes that precede a payload of ``payload_len`` bytes: both lengths and the header."""
    body = msgpack.packb(header, use_bin_type=True)
    return HEADER_LEN.pack(len(body)) + body + PAYLOAD_LEN.pack(payload_len)


def header_cost(header: dict) -> int:
    """Bytes a decoded header may keep alive: an object's worth (OBJECT_COST) for every map,
    list and element in it, and the characters of its strings."""
    cost, stack = 0, [header]
    while stack:
        node = stack.pop()
        cost += OBJECT_COST
        if isinstance(node, dict):
            cost += OBJECT_COST * len(node)
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, (str, bytes)):
            cost += len(node)
    return cost


def _recv_exact(sock: socket.socket, view: memoryview) -> bool:
    """Fill ``view`` from ``sock``; False if the peer closed before the first byte."""
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got : got + RECV_CHUNK])
        if n == 0:
            if got == 0:
                return False
            raise FrameError("the connection closed in the middle of a frame")
        got += n
    return True


def _recv_payload(
    sock: socket.socket,
    payload: np.ndarray,
    touch: Callable[[], None] | None,
    reserve: Callable[[int], None] | None,
) -> None:
    """Fill ``payload`` window by window, reserving (``reserve``) and committing each
    window's memory just before it, at no less than MIN_WINDOW_BYTES per RATE_WINDOW."""
    view, size, got = memoryview(payload), payload.size, 0
    since, mark = time.monotonic(), 0
    while got < size:
        end = min(size, got + min(RECV_CHUNK, max(FIRST_WINDOW, got)))
        if reserve is not None:
            reserve(end - got)
        memory.populate(payload, got, end)
        while got < end:
            n = sock.recv_into(view[got:end])
            if n == 0:
                raise FrameError("the connection closed in the middle of a frame")
            got += n
            now = time.monotonic()
            if now - since >= RATE_WINDOW:
                if got - mark < min(MIN_WINDOW_BYTES, size - mark):
                    raise FrameError(
                        f"payload arrives at {(got - mark) / (now - since):.0f} bytes/s, "
                        f"below the {MIN_WINDOW_BYTES / RATE_WINDOW:.0f} bytes/s floor"
                    )
                since, mark = now, got
        if touch is not None:
            touch()


def read_frame(
    sock: socket.socket,
    max_header: int = MAX_HEADER,
    max_payload: int = MAX_PAYLOAD,
    alloc: Callable[[int], np.ndarray] = memory.lazy,
    reserve: Callable[[int], None] | None = None,
    release: Callable[[int], None] | None = None,
    touch: Callable[[], None] | None = None,
    frame_timeout: float | None = None,
) -> tuple[dict, np.ndarray] | None:
    """Read one frame: its header and its payload as a uint8 array from ``alloc``; None on a
    clean close.

    ``reserve(nbytes)`` is asked before each window of a payload is received (it raises
    FrameError to refuse), so a peer holds what it has sent, not what it declared; what was
    reserved is given back with ``release`` once the payload is in or refused. ``touch`` is
    called as bytes arrive; once a frame has begun, the socket waits at most
    ``frame_timeout`` seconds for each recv, and a payload must keep MIN_WINDOW_BYTES per
    RATE_WINDOW coming.
    Raises FrameError when a length exceeds its bound or the header is not a msgpack map.
    """
    prefix = bytearray(HEADER_LEN.size)
    if not _recv_exact(sock, memoryview(prefix)):
        return None
    if touch is not None:
        touch()
    if frame_timeout is not None:
        sock.settimeout(frame_timeout)
    (header_len,) = HEADER_LEN.unpack(prefix)
    if header_len > max_header:
        raise FrameError(f"header of {header_len} bytes exceeds the {max_header}-byte bound")
    body = bytearray(header_len + PAYLOAD_LEN.size)
    if not _recv_exact(sock, memoryview(body)):
        raise FrameError("the connection closed in the middle of a frame")
    (payload_len,) = PAYLOAD_LEN.unpack_from(body, header_len)
    if payload_len > max_payload:
        raise FrameError(f"payload of {payload_len} bytes exceeds the {max_payload}-byte bound")
    try:
        header = msgpack.unpackb(memoryview(body)[:header_len], raw=False, strict_map_key=True)
    except Exception as exc:
        raise FrameError(f"header is not valid msgpack ({exc})") from None
    if not isinstance(header, dict):
        raise FrameError("header is not a msgpack map")
    reserved = [0]

    def reserve_more(nbytes: int) -> None:
        reserve(nbytes)  # type: ignore[misc]
        reserved[0] += nbytes

    if frame_timeout is not None:
        sock.settimeout(min(frame_timeout, RATE_WINDOW))
    try:
        payload = alloc(payload_len)
        _recv_payload(sock, payload, touch, reserve_more if reserve is not None else None)
    finally:
        if release is not None and reserved[0]:
            release(reserved[0])
    return header, payload
