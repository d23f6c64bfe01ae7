"""A hostile live client: what a careless or malicious peer sends a `tvis.serve()` server.

Used by tests/faults/test_hostile_live.py and bench/live_hostile_bench.py. Loopback only.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

from tvis.live import wire

HEADER = {
    "name": "hostile",
    "seq": 1,
    "time": 0.0,
    "sender": {"host": "h", "pid": 1, "rank": None},
    "dropped": 0,
}

SERVER = """
    import json, sys
    from tvis.live.server import LiveServer
    server = LiveServer("127.0.0.1", 0, **json.loads(sys.argv[1]))
    server.start()
    print(server.port, flush=True)
    for line in sys.stdin:
        stats = server.stats
        print(json.dumps({"refused": stats.refused, "last": stats.last_refusal,
                          "connected": server.connected,
                          "hostile": len(server.store.entries("hostile")),
                          "real": len(server.store.entries("real")),
                          "names": len(server.store.names()),
                          "total": server.store.total}), flush=True)
"""


def start_server(**options: int) -> tuple[subprocess.Popen, int]:
    """A live server in its own process (so its memory can be measured), built with
    ``options`` (LiveServer's keyword arguments); and its port."""
    import json

    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SERVER), json.dumps(options)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    return proc, int(proc.stdout.readline())


def report(proc: subprocess.Popen) -> dict:
    import json

    proc.stdin.write("?\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def hello(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(wire.pack({"hello": wire.PROTOCOL, "token": None, "sender": {}}))
    wire.read_frame(sock, max_payload=0)
    return sock


def oversized_declaration(port: int, payload_len: int = wire.MAX_PAYLOAD) -> socket.socket:
    """Say hello, declare a payload of ``payload_len`` bytes, send 1 KB of it, go quiet."""
    sock = hello(port)
    node = {"kind": "ndarray", "dtype": "uint8", "shape": [payload_len]}
    sock.sendall(wire.pack({**HEADER, **node}, payload_len) + b"\0" * 1024)
    return sock


def catch_frame(name: str, payload_len: int, header: dict | None = None) -> bytes:
    """A complete catch of ``payload_len`` zero bytes under ``name`` (``header`` adds fields)."""
    node = {"kind": "ndarray", "dtype": "uint8", "shape": [payload_len]}
    return wire.pack({**HEADER, **node, "name": name, **(header or {})}, payload_len) + bytes(
        payload_len
    )


def trickle(port: int, payload_len: int = wire.MAX_PAYLOAD, every: float = 0.2) -> socket.socket:
    """Declare a payload of ``payload_len`` bytes and send one byte of it every ``every``
    seconds from a thread, until the server drops the connection."""
    import threading

    sock = hello(port)
    node = {"kind": "ndarray", "dtype": "uint8", "shape": [payload_len]}
    sock.sendall(wire.pack({**HEADER, **node}, payload_len))

    def drip() -> None:
        try:
            while True:
                sock.sendall(b"\0")
                time.sleep(every)
        except OSError:
            pass

    threading.Thread(target=drip, daemon=True).start()
    return sock


def malformed_shape(port: int, shape: list) -> socket.socket:
    """A complete catch whose shape no array can have."""
    sock = hello(port)
    node = {"kind": "tensor", "dtype": "float32", "shape": shape}
    sock.sendall(wire.pack({**HEADER, **node}, 0))
    return sock


OVERFLOWING_SHAPES = [[0, 2**62], [0, 2**47, 2**47, 2**47], [2**40, 2**40], [-1], [0, 2**63 - 1]]


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """Whether the server closed ``sock`` within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True
