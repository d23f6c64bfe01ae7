"""Live-catching benchmark: what `tvis.catch` costs the training loop, and how fast it streams.

    .venv/bin/python bench/live_bench.py [--repeats 3]

1. catch() call time (median, p99) for a small tensor (1 KB) and a 64 MB tensor, with a server
   listening in another process: the cost the training loop sees.
2. Throughput of 64 MB tensors from catch() to a server in another process over loopback, against
   a raw socket sending the same bytes to a process that only receives them into one reused
   buffer (the physical limit). Twice: "cold", the server's first GiB, received into memory the
   process never touched before; "steady", the next GiB, once the history is full and evicted
   entries' memory is received into again, as in any job that runs for a while.

Targets (issue 6): small catch <= 20 us median; throughput >= 70 % of the raw socket.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import textwrap
import time

import numpy as np
import torch

import tvis
from tvis.live import catching

BIG = 64 * 1024**2
STREAMED = 16
"""64 MB tensors per throughput run: 1 GiB, long enough that connection setup is noise."""

SERVER = """
    import sys, time
    from tvis.live.server import LiveServer
    server = LiveServer("127.0.0.1", 0)
    server.start()
    print(server.port, flush=True)
    batch, batches = int(sys.argv[1]), int(sys.argv[2])
    for want in range(batch, batch * batches + 1, batch):
        while server.store.info("big") is None or server.store.info("big").received < want:
            time.sleep(0.002)
        print(time.monotonic(), flush=True)
    sys.stdin.read()
"""

RAW_RECEIVER = """
    import socket, sys, time
    import numpy as np
    want, size = int(sys.argv[1]), int(sys.argv[2])
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    buffer = np.empty(size, dtype=np.uint8)
    view = memoryview(buffer)
    for _ in range(want):
        got = 0
        while got < size:
            got += conn.recv_into(view[got : got + 16 * 1024**2])
    print(time.monotonic(), flush=True)
"""


def child(code: str, *args: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def call_times(
    tensor: torch.Tensor, calls: int, address: str, named: bool = True
) -> tuple[float, float]:
    """Median and p99 of catch() wall time in microseconds."""
    times = []
    for _ in range(calls):
        if named:
            start = time.perf_counter_ns()
            tvis.catch(tensor, name="bench", server=address)
        else:
            start = time.perf_counter_ns()
            tvis.catch(tensor, server=address)
        times.append((time.perf_counter_ns() - start) / 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def bench_calls() -> list[tuple[str, float, float]]:
    server = child(SERVER, 10**9, 1)
    address = f"127.0.0.1:{server.stdout.readline().strip()}"
    try:
        small = torch.randn(256)
        call_times(small, 2000, address)  # warm up: connection, caches
        rows = [("catch 1 KB tensor (µs)", *call_times(small, 20000, address))]
        rows.append(("  same, name inferred", *call_times(small, 20000, address, named=False)))
        big = torch.randn(BIG // 4)
        rows.append(("catch 64 MB tensor (µs)", *call_times(big, 40, address)))
        return rows
    finally:
        server.kill()


def tvis_throughput(tensor: torch.Tensor) -> tuple[float, float]:
    """GB/s (cold, steady) from the first catch of a batch of STREAMED tensors to the server
    holding them all; the server's history holds exactly one batch."""
    server = child(SERVER, STREAMED, 2)
    address = f"127.0.0.1:{server.stdout.readline().strip()}"
    tvis.catch(torch.zeros(1), name="warmup", server=address)
    sender = catching._senders[address]
    while sender.pending():
        time.sleep(0.001)
    rates = []
    for _ in range(2):
        start = time.monotonic()
        for _ in range(STREAMED):
            # Produce no faster than the link drains, as a training step would: nothing dropped.
            while sender.pending() >= 2:
                time.sleep(0.0005)
            tvis.catch(tensor, name="big", server=address)
        done = float(server.stdout.readline())
        rates.append(STREAMED * BIG / (done - start) / 1e9)
    server.kill()
    assert not sender.stats.dropped, sender.stats.dropped
    return rates[0], rates[1]


def raw_throughput(tensor: torch.Tensor) -> float:
    """GB/s of sendall of the same bytes to a process that only receives them."""
    import socket

    receiver = child(RAW_RECEIVER, STREAMED, BIG)
    port = int(receiver.stdout.readline())
    data = memoryview(tensor.numpy().reshape(-1).view(np.uint8))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        start = time.monotonic()
        for _ in range(STREAMED):
            sock.sendall(data)
        done = float(receiver.stdout.readline())
    receiver.wait()
    return STREAMED * BIG / (done - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs of each kind")
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, Python {sys.version.split()[0]}"
    )
    print(f"\n{'call cost':<26}{'median':>10}{'p99':>10}")
    for label, median, p99 in bench_calls():
        print(f"{label:<26}{median:>10.1f}{p99:>10.1f}")
    tensor = torch.randn(BIG // 4)
    runs = [(*tvis_throughput(tensor), raw_throughput(tensor)) for _ in range(args.repeats)]
    header = f"{'64 MB tensors, loopback':<26}{'cold':>8}{'steady':>8}{'raw':>8}"
    print(f"\n{header}{'cold/raw':>10}{'steady/raw':>12}   (GB/s)")
    rows = [(f"run {i}", *run) for i, run in enumerate(runs, 1)]
    rows.append(("median", *(statistics.median(x) for x in zip(*runs, strict=True))))
    for label, cold, steady, raw in rows:
        print(
            f"{label:<26}{cold:>8.2f}{steady:>8.2f}{raw:>8.2f}{cold / raw:>10.0%}{steady / raw:>12.0%}"
        )


if __name__ == "__main__":
    main()
