"""The training process's link to one server: a bounded queue drained by one daemon thread.

The training thread only appends to the queue (dropping the oldest item when it is full); the
thread owns the one persistent TCP connection, opens it when there is something to send, and
reopens it with back-off whenever it fails, so a server started late still receives. Nothing here
raises into the caller, and interpreter exit waits for pending sends only briefly.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tvis import __version__
from tvis.live import codec, wire
from tvis.live.address import Address
from tvis.live.tensors import HostBuffers

MAX_ITEMS = 64
"""Queue length bound: a few steps' worth of catches; a stalled server should cost memory for
recent values only, never a growing backlog."""

MAX_BYTES = 512 * 1024**2
"""Queue size bound: host memory the training process may spend on values waiting to be sent.
One item larger than this is still kept alone, so a big tensor is never refused outright."""

BACKOFF = (0.05, 1.0)
"""Reconnect delays, first and longest: retries double up to one second, so a server started late
receives within a second of starting while an absent one costs one failed connect per second."""

REFUSED_RETRY = 30.0
"""Seconds before asking again a server that refused us (a wrong token): it will not change its
mind soon, and each attempt is a warning in the session it is serving."""

CONNECT_TIMEOUT = 3.0
"""Seconds to open a connection and hear the server's reply to the hello."""

SEND_TIMEOUT = 30
"""Seconds a send may make no progress at all before the server is treated as gone. Set as the
kernel's SO_SNDTIMEO on a blocking socket: a Python-level timeout would turn every large send
into many non-blocking writes and polls."""

COALESCE = 64 * 1024
"""Payloads below this go out in one write with their header, saving a syscall per small catch."""


def sender_info() -> dict:
    """Who is sending: host name, process id and distributed rank (None outside a job)."""
    rank = next(
        (os.environ[k] for k in ("RANK", "SLURM_PROCID", "LOCAL_RANK") if k in os.environ), None
    )
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "rank": int(rank) if rank is not None and rank.isdigit() else None,
    }


@dataclass
class _Item:
    name: str
    seq: int
    time: float
    snap: Any
    nbytes: int


@dataclass
class SenderStats:
    """What a sender has done so far: frames sent, items dropped per name, connection state
    (``unreachable``: the latest attempt to connect failed)."""

    sent: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    connected: bool = False
    unreachable: bool = False
    last_error: str | None = None


class Sender:
    """A bounded, drop-oldest send queue to one server address, drained by a daemon thread."""

    def __init__(
        self,
        address: Address,
        buffers: HostBuffers | None = None,
        max_items: int = MAX_ITEMS,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.address = address
        self.buffers = buffers or HostBuffers()
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.stats = SenderStats()
        self._queue: deque[_Item] = deque()
        self._bytes = 0
        self._busy = False
        self._cond = threading.Condition()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._info = sender_info()
        self._refused = False  # the latest attempt to connect was refused
        self._refusal_reported = False

    def put(self, name: str, seq: int, snap: Any, nbytes: int) -> None:
        """Queue a snapshot; drop the oldest items if the queue is over its bounds."""
        item = _Item(name, seq, time.time(), snap, nbytes)
        with self._cond:
            self._queue.append(item)
            self._bytes += nbytes
            self._enforce_bounds()
            self._cond.notify()
        if self._thread is None:
            self._start()

    def pending(self) -> int:
        """Items queued or being written right now."""
        with self._cond:
            return len(self._queue) + self._busy

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the queue to drain, unless the server is
        unreachable; True if it drained."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or self.stats.unreachable:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def _enforce_bounds(self) -> None:
        while len(self._queue) > self.max_items or (
            self._bytes > self.max_bytes and len(self._queue) > 1
        ):
            old = self._queue.popleft()
            self._bytes -= old.nbytes
            self.stats.dropped[old.name] = self.stats.dropped.get(old.name, 0) + 1
            codec.release(old.snap, self.buffers)

    def _start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="tvis-live-sender", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        delay = BACKOFF[0]
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
            if not self._alive() and not self._connect():
                time.sleep(REFUSED_RETRY if self._refused else delay)
                delay = min(delay * 2, BACKOFF[1])
                continue
            delay = BACKOFF[0]
            with self._cond:
                item = self._queue.popleft()
                self._bytes -= item.nbytes
                self._busy = True
            try:
                self._write(*self._frame(item))
                self.stats.sent += 1
                codec.release(item.snap, self.buffers)
            except OSError as exc:
                self._disconnect(exc)
                # Back at the head: it goes out first on the next connection, unless the bounds
                # say it is now the oldest thing worth dropping.
                with self._cond:
                    self._queue.appendleft(item)
                    self._bytes += item.nbytes
                    self._enforce_bounds()
            except Exception as exc:
                # Not even a note about it could be encoded (say, a name that is not valid
                # UTF-8): this item is lost, the thread and the connection carry on.
                self.stats.last_error = str(exc)
                codec.release(item.snap, self.buffers)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _alive(self) -> bool:
        """Whether the connection is open: the server never speaks after its reply, so anything
        readable means it closed, and we find out before losing a frame to a dead socket."""
        if self._sock is None:
            return False
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        if not poller.poll(0):
            return True
        self._disconnect(ConnectionError("the server closed the connection"))
        return False

    def _connect(self) -> bool:
        try:
            sock = socket.create_connection(
                (self.address.host, self.address.port), timeout=CONNECT_TIMEOUT
            )
        except OSError as exc:
            self._mark_unreachable(str(exc))
            return False
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello = {
                "hello": wire.PROTOCOL,
                "version": __version__,
                "token": self.address.token,
                "sender": self._info,
            }
            sock.sendall(wire.pack(hello))
            reply = wire.read_frame(sock, max_payload=0)
        except (OSError, wire.FrameError) as exc:
            sock.close()
            self._mark_unreachable(str(exc))
            return False
        if reply is None or reply[0].get("ok") is not True:
            sock.close()
            self._report_refusal(reply[0].get("error") if reply else "it closed the connection")
            return False
        sock.settimeout(None)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", SEND_TIMEOUT, 0))
        self._sock = sock
        self.stats.connected, self.stats.unreachable = True, False
        return True

    def _mark_unreachable(self, error: str) -> None:
        self._refused = False
        with self._cond:
            self.stats.last_error = error
            self.stats.unreachable = True
            self._cond.notify_all()

    def _report_refusal(self, error: Any) -> None:
        self._mark_unreachable(f"refused: {error}")
        self._refused = True
        if not self._refusal_reported:
            # Once per process: the training log gets one clear line, not one per retry.
            self._refusal_reported = True
            sys.stderr.write(f"tvis.catch: the server at {self.address} refused us: {error}\n")

    def _frame(self, item: _Item) -> tuple[bytes, list[memoryview]]:
        """The header bytes and payload buffers for ``item``; a note if it cannot be encoded."""
        try:
            return self._encode(item)
        except Exception as exc:
            return self._encode(_Item(item.name, item.seq, item.time, codec.Unsent(str(exc)), 0))

    def _encode(self, item: _Item) -> tuple[bytes, list[memoryview]]:
        node, buffers = codec.encode(item.snap)
        size = sum(b.nbytes for b in buffers)
        header = {
            **node,
            "name": item.name,
            "seq": item.seq,
            "time": item.time,
            "sender": self._info,
            "dropped": self.stats.dropped.get(item.name, 0),
        }
        head = wire.pack(header, size)
        if len(head) > wire.MAX_HEADER:
            # The server would refuse this frame and drop the connection.
            raise ValueError(f"its description exceeds {wire.MAX_HEADER} bytes")
        return head, buffers

    def _write(self, head: bytes, buffers: list[memoryview]) -> None:
        sock = self._sock
        if sum(b.nbytes for b in buffers) < COALESCE:
            sock.sendall(b"".join([head, *buffers]))
            return
        sock.sendall(head)
        for buffer in buffers:
            sock.sendall(buffer)

    def _disconnect(self, exc: Exception) -> None:
        self.stats.last_error = str(exc)
        self.stats.connected = False
        if self._sock is not None:
            self._sock.close()
            self._sock = None
