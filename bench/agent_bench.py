"""The agent over a real loopback sshd: call latency, bytes per screenful, array throughput.

    .venv/bin/python bench/agent_bench.py [--repeat 50]

Starts the test suite's sshd lab (tests/sshd.py) in a temporary folder, writes a run with
a large activation (64×256×56×56 float32, 196 MiB) and a 4096×4096 matrix, twice: values
rounded and compressed in chunks (format 4, what `tvis run` writes) and raw (format 2, older
runs; with ``--against exact``: chunked with every bit, as format 3 wrote them), and
measures through ``tvis agent --stdio`` over ssh (one shared ControlMaster connection),
each figure for both formats, calls alternating between them:

- latency of ``hello`` and of a typical ``view`` (120×40 heatmap of one channel);
- bytes on the wire for a 120×40 view versus the raw tensor;
- array throughput versus ``ssh host cat blob`` on the same shared connection: ``read``
  (raw chunks in data frames, several in flight, each written straight into the result
  array; what the Python API and the viewer's export use) and the older ``array`` pages
  (48 MiB msgpack replies, one after another). Rounds alternate between the agent and
  ``cat`` so that both meet the same load on a shared machine; the best of each is kept,
  and the median of each round's own ratio;
- in-process (``LocalClient``) ``read`` throughput versus a plain copy of the
  memory-mapped blob into a new array (memory speed on this machine).

Prints a Markdown table (the figures in bench/README.md come from it).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sshd import SshLab, start_lab  # noqa: E402

from tvis.agent.client import LocalClient, connect  # noqa: E402
from tvis.agent.protocol import PROTOCOL_VERSION, reply_body  # noqa: E402
from tvis.agent.target import Target  # noqa: E402
from tvis.store.format import COMPLETE  # noqa: E402
from tvis.store.rounding import MANTISSA_BITS  # noqa: E402
from tvis.store.writer import RunWriter  # noqa: E402

RUN = "tvis_runs/20260101-000000_bench_000000"
RUN_RAW = "tvis_runs/20260101-000000_bench_raw_000000"  # the same values, format 2 (raw)
ACTIVATION, MATRIX = 0, 1
SCREEN = {"width": 120, "height": 40}
MiB = 1 << 20


def build_run(
    root: Path, name: str = RUN, chunked: bool = True, bits: int | None = MANTISSA_BITS
) -> Path:
    """A run whose batch 0 holds the large activation and a large matrix."""
    rng = np.random.default_rng(0)
    arrays = {
        ACTIVATION: rng.random((64, 256, 56, 56), dtype=np.float32),
        MATRIX: rng.random((4096, 4096), dtype=np.float32),
    }
    tensors = [
        {
            "id": tid,
            "shape": list(a.shape),
            "dtype": "float32",
            "device": "cpu",
            "stats": {"numel": int(a.size)},
            "batch_dim": 0 if tid == ACTIVATION else None,
            "batch_dim_inferred": False,
            "grad": None,
            "of": None,
        }
        for tid, a in arrays.items()
    ]
    call = {
        "id": 0,
        "parent": -1,
        "depth": 0,
        "kind": "module",
        "name": "features.4",
        "cls": "Conv2d",
        "phase": "forward",
        "inputs": [],
        "outputs": [{"name": "out", "tensor": ACTIVATION}],
        "t0": 0.0,
        "fwd_ms": 1.0,
        "flags": [],
    }
    batch = {"index": 0, "step": 0, "micro": 0, "batch_size": 64, "n_calls": 1, "phase_ms": {}}
    writer = RunWriter(root / name, {"script": "bench.py"}, chunked=chunked, mantissa_bits=bits)
    writer.write_batch(0, {"batch": batch, "calls": [call], "tensors": tensors}, arrays)
    writer.write_index({"batches": [batch], "steps": [], "params": [], "notices": [], "data": {}})
    writer.write_meta(status=COMPLETE)
    return root / name


def timed(fn: Callable[[int], object], repeat: int) -> tuple[float, float]:
    """Median and 90th percentile of ``fn(i)`` in milliseconds."""
    times = []
    for i in range(repeat):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def wire_bytes(result: object) -> int:
    """The size of the reply frame that carries ``result``."""
    return 4 + len(reply_body({"id": 1, "result": result}))


def timed_pair(
    a: Callable[[int], object], b: Callable[[int], object], repeat: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """``timed`` of ``a`` and of ``b``, their calls alternating (the same load for both)."""
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(repeat):
        for fn, out in ((a, times[0]), (b, times[1])):
            t = time.perf_counter()
            fn(i)
            out.append((time.perf_counter() - t) * 1000)
    return tuple(  # type: ignore[return-value]
        (statistics.median(sorted(t)), sorted(t)[int(0.9 * (len(t) - 1))]) for t in times
    )


def read_throughput(client, total_bytes: int, run: str = RUN) -> float:
    """MiB/s fetching the whole activation with ``read_values`` into a new array (made as
    the Python API makes it)."""
    out = np.empty((64, 256, 56, 56), np.float32)
    t = time.perf_counter()
    client.read_values(memoryview(out).cast("B"), run=run, batch=0, tensor=ACTIVATION)
    seconds = time.perf_counter() - t
    assert out.nbytes == total_bytes
    return total_bytes / MiB / seconds


def memory_throughput(blob: Path, total_bytes: int) -> float:
    """MiB/s of copying the activation out of the memory-mapped blob into a new array."""
    mapped = np.memmap(blob, np.float32, mode="r", shape=(total_bytes // 4,))
    t = time.perf_counter()
    out = np.empty_like(mapped)
    np.copyto(out, mapped)
    return total_bytes / MiB / (time.perf_counter() - t)


def array_throughput(client, total_bytes: int) -> float:
    """MiB/s fetching the whole activation in ``array`` pages."""
    start, got, t = 0, 0, time.perf_counter()
    while start is not None:
        page = client.call(
            "array", run=RUN, batch=0, tensor=ACTIVATION, max_elems=1 << 30, start=start
        )
        got += page["array"].nbytes
        start = page["next"]
    assert got == total_bytes, (got, total_bytes)
    return got / MiB / (time.perf_counter() - t)


def cat_throughput(lab: SshLab, control: Path, blob: Path) -> float:
    """MiB/s of `ssh tvis-test cat blob` over the same shared connection, timed from its
    first byte (the session's start-up is not counted against cat)."""
    argv = [*lab.ssh_command, "-o", "ControlMaster=auto", "-o", f"ControlPath={control}/%C"]
    proc = subprocess.Popen([*argv, "tvis-test", "cat", str(blob)], stdout=subprocess.PIPE)
    got = len(proc.stdout.read(1))
    t = time.perf_counter()
    while chunk := proc.stdout.read1(1 << 20):
        got += len(chunk)
    proc.wait()
    return (got - 1) / MiB / (time.perf_counter() - t)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="calls per latency figure")
    parser.add_argument("--rounds", type=int, default=3, help="transfers per throughput figure")
    parser.add_argument(
        "--against",
        choices=("raw", "exact"),
        default="raw",
        help="the second run: raw (format 2) or chunked with exact values (format 3, "
        "what tvis run wrote before values were rounded)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tvis-bench-") as tmp:
        folder = Path(tmp)
        (folder / "lab").mkdir()
        run_path = build_run(folder / "root")
        raw_path = build_run(folder / "root", RUN_RAW, chunked=args.against == "exact", bits=None)
        lab = start_lab(folder / "lab")
        control = lab.control_dir()
        try:
            target = Target(
                path=str(folder / "root"), host="tvis-test", remote_tvis=lab.remote_tvis
            )
            t = time.perf_counter()
            first = connect(target, ssh_command=lab.ssh_command, control_dir=control)
            cold_ms = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            client = connect(target, ssh_command=lab.ssh_command, control_dir=control)
            warm_ms = (time.perf_counter() - t) * 1000
            first.close()
            local = LocalClient(folder / "root")
            rows = measure(client, local, lab, control, raw_path, args, cold_ms, warm_ms)
            rows.append(
                (
                    f"run on disk, rounded · {_other(args)}",
                    f"{_mib(run_path):.1f} · {_mib(raw_path):.1f} MiB",
                )
            )
            client.close()
        finally:
            lab.close()
    print("| measure | figure |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    return 0


def _other(args: argparse.Namespace) -> str:
    """What the second run holds."""
    return "exact (format 3)" if args.against == "exact" else "raw (format 2)"


def _mib(run: Path) -> float:
    return sum(f.stat().st_size for f in run.rglob("*") if f.is_file()) / MiB


def measure(client, local, lab, control, run_path, args, cold_ms, warm_ms) -> list[tuple[str, str]]:
    """``run_path``: the raw run, whose blob ``cat`` sends."""

    def view(c, tensor: int, run: str = RUN) -> Callable[[int], object]:
        if tensor == ACTIVATION:
            return lambda i: c.call(
                "view", run=run, batch=0, tensor=tensor, sample=i % 64, index=[i % 256], **SCREEN
            )
        return lambda i: c.call("view", run=run, batch=0, tensor=tensor, **SCREEN)

    def pair(c, tensor: int, repeat: int):
        return timed_pair(view(c, tensor), view(c, tensor, RUN_RAW), repeat)

    hello = lambda i: client.call("hello", protocol=PROTOCOL_VERSION)  # noqa: E731
    hello_ssh = timed(hello, args.repeat)
    view_ssh, view_ssh_raw = pair(client, ACTIVATION, args.repeat)
    matrix_ssh, matrix_ssh_raw = pair(client, MATRIX, max(args.repeat // 5, 3))
    view_local, view_local_raw = pair(local, ACTIVATION, args.repeat)
    activation_bytes = 64 * 256 * 56 * 56 * 4
    screen_bytes = wire_bytes(view(client, ACTIVATION)(0))
    matrix_bytes = wire_bytes(view(client, MATRIX)(0))
    blob = run_path / "batches" / "000000" / "blob.bin"
    read_mib_s, cat_mib_s, array_mib_s, raw_mib_s = [], [], [], []
    for _ in range(args.rounds):  # alternating, so that all meet the same load
        read_mib_s.append(read_throughput(client, activation_bytes))
        raw_mib_s.append(read_throughput(client, activation_bytes, RUN_RAW))
        cat_mib_s.append(cat_throughput(lab, control, blob))
        array_mib_s.append(array_throughput(client, activation_bytes))
    read_best, cat_best, array_best = max(read_mib_s), max(cat_mib_s), max(array_mib_s)
    raw_best = max(raw_mib_s)
    paired = statistics.median(r / c for r, c in zip(read_mib_s, cat_mib_s, strict=True))
    local_read, local_raw, memory = [], [], []
    for _ in range(args.rounds):
        local_read.append(read_throughput(local, activation_bytes))
        local_raw.append(read_throughput(local, activation_bytes, RUN_RAW))
        memory.append(memory_throughput(blob, activation_bytes))
    local_best, memory_best, local_raw_best = max(local_read), max(memory), max(local_raw)
    return [
        ("connect, cold (new ssh connection + agent start)", f"{cold_ms:.0f} ms"),
        ("connect, shared ControlMaster connection", f"{warm_ms:.0f} ms"),
        ("`hello` over ssh, median / p90", "{:.2f} / {:.2f} ms".format(*hello_ssh)),
        (
            f"`view` 120×40 of one channel of 64×256×56×56 over ssh, median / p90, rounded · {_other(args)}",
            "{:.2f} / {:.2f} · {:.2f} / {:.2f} ms".format(*view_ssh, *view_ssh_raw),
        ),
        (
            f"same `view` in-process (LocalClient), median / p90, rounded · {_other(args)}",
            "{:.2f} / {:.2f} · {:.2f} / {:.2f} ms".format(*view_local, *view_local_raw),
        ),
        (
            f"`view` 120×40 of a 4096×4096 matrix over ssh, median / p90, rounded · {_other(args)}",
            "{:.2f} / {:.2f} · {:.2f} / {:.2f} ms".format(*matrix_ssh, *matrix_ssh_raw),
        ),
        ("raw activation 64×256×56×56 float32", f"{activation_bytes / MiB:.1f} MiB"),
        ("reply frame for the 120×40 view of it", f"{screen_bytes / 1024:.1f} KiB"),
        ("raw matrix 4096×4096 float32", f"{4096 * 4096 * 4 / MiB:.1f} MiB"),
        ("reply frame for its 120×40 view", f"{matrix_bytes / 1024:.1f} KiB"),
        ("`read`, 8 MiB chunks, 4 in flight, over ssh", f"{read_best:.0f} MiB/s"),
        (f"the same `read` of the {_other(args)} run", f"{raw_best:.0f} MiB/s"),
        ("`ssh tvis-test cat blob.bin`, same connection", f"{cat_best:.0f} MiB/s"),
        ("`read` / ssh cat, best of each", f"**{100 * read_best / cat_best:.0f} %**"),
        ("`read` / ssh cat, median of the rounds' own ratios", f"{100 * paired:.0f} %"),
        ("`array` pages (48 MiB each, one after another) over ssh", f"{array_best:.0f} MiB/s"),
        ("`array` / ssh cat", f"{100 * array_best / cat_best:.0f} %"),
        ("`read` in-process (LocalClient)", f"{local_best:.0f} MiB/s"),
        (f"the same of the {_other(args)} run", f"{local_raw_best:.0f} MiB/s"),
        ("copy of the memory-mapped blob into a new array", f"{memory_best:.0f} MiB/s"),
        ("`read` in-process / memory copy", f"**{100 * local_best / memory_best:.0f} %**"),
        (
            "rounds, MiB/s (read · cat · array)",
            " / ".join(
                f"{r:.0f}·{c:.0f}·{a:.0f}"
                for r, c, a in zip(read_mib_s, cat_mib_s, array_mib_s, strict=True)
            ),
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())
