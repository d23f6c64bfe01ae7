"""Helpers for the live-catching tests: waiting, free ports, and Python subprocesses."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator

from tvis.live import wire

PYTHON = sys.executable


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def free_port() -> int:
    """A port nothing listens on right now (bound to 0, read back, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python(code: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
    """Start ``python -c code`` (dedented) with ``env`` added to this environment."""
    return subprocess.Popen(
        [PYTHON, "-c", textwrap.dedent(code)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def connect(address: str, token: str | None = None) -> socket.socket:
    """A raw client connection that has said hello and been accepted."""
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.sendall(wire.pack({"hello": wire.PROTOCOL, "token": token, "sender": {}}))
    reply = wire.read_frame(sock, max_payload=0)
    assert reply is not None and reply[0]["ok"], reply
    return sock


@contextlib.contextmanager
def stalled_server() -> Iterator[str]:
    """The address of a server that accepts one sender, answers its hello, then never reads."""
    listener = socket.create_server(("127.0.0.1", 0))
    held = []

    def accept_then_never_read() -> None:
        conn, _ = listener.accept()
        held.append(conn)
        wire.read_frame(conn)
        conn.sendall(wire.pack({"ok": True}))

    threading.Thread(target=accept_then_never_read, daemon=True).start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        for conn in held:
            conn.close()
        listener.close()


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """Whether the server closes ``sock`` (reads EOF or a reset) within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True
