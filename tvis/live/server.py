"""The receiving end: a TCP server that checks every frame and keeps catches in a Store.

One thread accepts, one thread per connection reads. A connection that breaks the format, a
bound or the token is dropped and counted; the server itself keeps serving. Nothing received is
unpickled or evaluated: headers are msgpack maps checked field by field, payloads are viewed as
arrays of an allow-listed dtype.
"""

from __future__ import annotations

import hmac
import logging
import socket
import threading
import time
from dataclasses import dataclass

import numpy as np

from tvis.live import codec, wire
from tvis.live.address import DEFAULT_HOST, DEFAULT_PORT, is_loopback
from tvis.live.memory import BufferPool, lazy
from tvis.live.store import HISTORY, MAX_BYTES, MAX_NAMES, MAX_TOTAL, Entry, Store

log = logging.getLogger("tvis.live")

MAX_CONNECTIONS = 64
"""Concurrent senders served: every rank of a large node plus slack; more would only be threads
held open by someone who should not be connecting."""

HELLO_TIMEOUT = 5.0
"""Seconds a new connection has to say hello before it is dropped."""

FRAME_TIMEOUT = 30.0
"""Seconds a frame in progress may go without a byte: loopback and cluster links deliver a 2 GiB
payload with no such pause; a peer that stalls mid-frame holds memory for nothing."""

IDLE_TIMEOUT = 600.0
"""Seconds a sender may stay silent between catches before its connection is closed; a sender
reconnects by itself when it has something to say, so this only frees idle seats."""

ADMIT_IDLE = 1.0
"""When every seat is taken, a new sender takes the seat of the connection silent the longest,
if it has been silent at least this long: idle connections cannot lock real senders out."""

MAX_IN_FLIGHT = 2 * 1024**3
"""Payload bytes being received at once, across connections: one largest frame (wire.MAX_PAYLOAD).
Each connection holds what it has really received (window by window, see wire.read_frame), never
what it declared, so a peer that declares much and sends little holds little; a frame whose bytes
arrive beyond what is left is refused with the reason, and its sender retries."""

MAX_NAME = 256
"""Longest name accepted: names are identifiers and labels, never payloads."""


@dataclass
class ServerStats:
    """Counters a viewer shows: connections accepted, connections refused and the latest reason."""

    connections: int = 0
    refused: int = 0
    last_refusal: str | None = None


class LiveServer:
    """A background TCP server receiving catches into ``store``.

    Binding anything but loopback requires ``token``, which senders present as
    ``TOKEN@HOST:PORT``; with a token set, loopback senders must present it too.
    """

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        token: str | None = None,
        history: int = HISTORY,
        max_bytes: int = MAX_BYTES,
        max_header: int = wire.MAX_HEADER,
        max_payload: int = wire.MAX_PAYLOAD,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_total: int = MAX_TOTAL,
        max_names: int = MAX_NAMES,
    ) -> None:
        if not token and not is_loopback(host):
            raise ValueError(
                f"Serving on {host or 'every interface'} lets anyone who can reach it send to "
                "this session; pass token=... and have senders use TOKEN@HOST:PORT."
            )
        self.host, self.port, self.token = host, port, token
        self.max_header, self.max_payload = max_header, max_payload
        # Payloads of evicted entries nobody holds are received into again: fresh memory costs
        # more to fill than loopback costs to deliver (see memory.py).
        self._buffers = BufferPool(fresh=lazy)
        self.store = Store(
            history, max_bytes, recycle=self._buffers.give, max_total=max_total, max_names=max_names
        )
        self.stats = ServerStats()
        self.max_in_flight = max_in_flight
        self._in_flight = 0
        self._listener: socket.socket | None = None
        self._connections: dict[socket.socket, float] = {}  # -> when it last sent a byte
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        """``host:port`` as bound (the real port when 0 was asked for)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._listener is not None

    @property
    def connected(self) -> int:
        """Senders connected right now."""
        with self._lock:
            return len(self._connections)

    def start(self) -> None:
        """Bind and start accepting in a daemon thread; raise OSError if the port is taken."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._listener = socket.create_server((self.host, self.port), family=family, backlog=16)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name="tvis-live-accept", daemon=True).start()

    def stop(self) -> None:
        """Stop accepting and close every connection."""
        listener, self._listener = self._listener, None
        with self._lock:
            sockets = [s for s in (listener, *self._connections) if s is not None]
        for sock in sockets:
            _wake(sock)
            sock.close()

    def _accept(self) -> None:
        listener = self._listener
        while True:
            try:
                conn, peer = listener.accept()
            except OSError:
                return
            with self._lock:
                seated = self._seat(conn)
            if not seated:
                self._refuse(peer, "too many connections, none of them idle")
                conn.close()
                continue
            self.stats.connections += 1
            threading.Thread(
                target=self._serve, args=(conn, peer), name="tvis-live-conn", daemon=True
            ).start()

    def _seat(self, conn: socket.socket) -> bool:
        """Admit ``conn`` (under the lock): a free seat, or the seat of the connection silent
        the longest when that one has been silent ADMIT_IDLE seconds."""
        if len(self._connections) >= MAX_CONNECTIONS:
            idlest, since = min(self._connections.items(), key=lambda item: item[1])
            if time.monotonic() - since < ADMIT_IDLE:
                return False
            del self._connections[idlest]
            self.stats.refused += 1
            self.stats.last_refusal = "an idle connection made room for a new sender"
            _wake(idlest)  # its own thread sees the closed socket and ends
        self._connections[conn] = time.monotonic()
        return True

    def _serve(self, conn: socket.socket, peer: tuple) -> None:
        def touch() -> None:
            with self._lock:
                if conn in self._connections:
                    self._connections[conn] = time.monotonic()

        try:
            conn.settimeout(HELLO_TIMEOUT)
            if not self._greet(conn, peer):
                return
            touch()
            limits = (
                self.max_header,
                self.max_payload,
                self._buffers.take,
                self._reserve,
                self._release,
                touch,
            )
            while True:
                conn.settimeout(IDLE_TIMEOUT)
                frame = wire.read_frame(conn, *limits, frame_timeout=FRAME_TIMEOUT)
                if frame is None:
                    break
                header, payload = frame
                self.store.add(self._entry(header, payload), header["dropped"])
        except wire.FrameError as exc:
            self._refuse(peer, str(exc))
        except OSError:
            pass  # The sender went away or went quiet; it reconnects when it has something to say.
        except Exception as exc:  # a catch no check above foresaw: refused, never a traceback
            self._refuse(peer, f"malformed catch ({type(exc).__name__}: {exc})")
        finally:
            with self._lock:
                self._connections.pop(conn, None)
            conn.close()

    def _reserve(self, nbytes: int) -> None:
        """Take ``nbytes`` more of the bytes-in-flight budget; FrameError when it is spent."""
        with self._lock:
            if self._in_flight + nbytes > self.max_in_flight:
                raise wire.FrameError(
                    f"payload refused at {nbytes} more bytes: {self._in_flight} bytes are being "
                    f"received already and the server takes at most {self.max_in_flight} at once"
                )
            self._in_flight += nbytes

    def _release(self, nbytes: int) -> None:
        with self._lock:
            self._in_flight -= nbytes

    def _greet(self, conn: socket.socket, peer: tuple) -> bool:
        frame = wire.read_frame(conn, self.max_header, max_payload=0)
        if frame is None:
            return False
        hello = frame[0]
        error = None
        if hello.get("hello") != wire.PROTOCOL:
            error = (
                f"this server speaks live protocol {wire.PROTOCOL} and the sender "
                f"{hello.get('hello')!r}; install the same tvis version on both sides"
            )
        elif self.token and not _same(hello.get("token"), self.token):
            error = "wrong or missing token; send to TOKEN@HOST:PORT"
        reply = {"ok": True} if error is None else {"ok": False, "error": error}
        conn.sendall(wire.pack(reply))
        if error is not None:
            self._refuse(peer, error)
        return error is None

    def _entry(self, header: dict, payload: np.ndarray) -> Entry:
        name, seq, sent = header.get("name"), header.get("seq"), header.get("time")
        sender, dropped = header.get("sender"), header.get("dropped")
        if not (isinstance(name, str) and 0 < len(name) <= MAX_NAME):
            raise wire.FrameError("name is not a string of 1 to 256 characters")
        if not all(_is_int(v) and v >= 0 for v in (seq, dropped)):
            raise wire.FrameError("seq or dropped is not a non-negative integer")
        if not isinstance(sent, float):
            raise wire.FrameError("time is not a float")
        if not (
            isinstance(sender, dict)
            and isinstance(sender.get("host"), str)
            and _is_int(sender.get("pid"))
            and (sender.get("rank") is None or _is_int(sender.get("rank")))
        ):
            raise wire.FrameError("sender is not {host, pid, rank}")
        value = codec.decode(header, payload)
        entry = Entry(name, seq, sent, time.time(), sender, value, payload.size, payload)
        entry.header_cost = wire.header_cost(header)
        return entry

    def _refuse(self, peer: tuple, reason: str) -> None:
        self.stats.refused += 1
        self.stats.last_refusal = reason
        log.warning("tvis live: refused %s: %s", peer[0] if peer else "?", reason)


def _wake(sock: socket.socket) -> None:
    # shutdown, not just close: it wakes the thread blocked in accept or recv on it.
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same(given: object, token: str) -> bool:
    # Constant-time, so response timing does not leak how much of a guess was right.
    return isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())
