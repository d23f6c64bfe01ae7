"""Live server under a hostile client: peak memory, refusals, and whether a real sender gets in.

    .venv/bin/python bench/live_hostile_bench.py

The server runs in its own process (`tvis.live.server.LiveServer` on loopback). Against it, in
order: 64 connections that each declare a 2 GiB payload, send 1 KB of it and go quiet; 64 more
that say hello and go quiet; 200 catches whose shapes overflow; then one real `tvis.catch`.
Reported: the server's resident memory at start and its peak (VmHWM), refusals counted, and the
seconds until the real catch arrived. Target (issue 15): peak <= 256 MB; the real catch arrives.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "faults"))

from hostile_client import (  # noqa: E402
    OVERFLOWING_SHAPES,
    hello,
    malformed_shape,
    oversized_declaration,
    peak_rss_mb,
    report,
    start_server,
    wait_until,
)

import tvis  # noqa: E402
from tvis.live import server as server_module  # noqa: E402


def main() -> None:
    proc, port = start_server()
    try:
        time.sleep(0.5)
        start = peak_rss_mb(proc.pid)
        held = []
        for _ in range(server_module.MAX_CONNECTIONS):
            try:
                held.append(oversized_declaration(port))
            except OSError:
                pass  # refused: the server is full
        for _ in range(server_module.MAX_CONNECTIONS):
            try:
                held.append(hello(port))
            except OSError:
                pass
        for i in range(200):
            try:
                malformed_shape(port, OVERFLOWING_SHAPES[i % len(OVERFLOWING_SHAPES)]).close()
            except OSError:
                pass
        time.sleep(server_module.ADMIT_IDLE * 1.5)
        sent = time.monotonic()
        tvis.catch(1.0, name="real", server=f"127.0.0.1:{port}")
        arrived = wait_until(lambda: report(proc)["real"] == 1, timeout=120)
        waited = time.monotonic() - sent
        stats = report(proc)
        peak = peak_rss_mb(proc.pid)
        print(f"server RSS at start       {start:8.1f} MB")
        print(f"server peak RSS (VmHWM)   {peak:8.1f} MB   (target <= 256 MB)")
        print(f"refusals counted          {stats['refused']:8d}   last: {stats['last']}")
        print(f"connections held open     {stats['connected']:8d}")
        print(f"real catch arrived        {arrived!s:>8}   after {waited:.2f} s")
        for sock in held:
            sock.close()
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
