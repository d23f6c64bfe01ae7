"""How fast the terminal viewer is, as a user feels it.

    .venv/bin/python bench/tui_bench.py [RUN_DIR] [--repeat 5] [--no-ssh]
                                        [--moves-only | --screens-only]

- first screen: from starting `tvis tui RUN` (a real process in a 120×40 tmux pane; it opens
  on Replay, and `2` is pressed as soon as Replay shows) until the complete Explore screen is
  on the terminal — tree, selected call, tensor cards with their
  histograms and heatmaps — locally and over a loopback sshd (`tvis tui host:RUN`);
- first page: the same, with no key pressed, until Replay's complete page is on the terminal
  (timeline, the layer list, the followed sample's picture and its transforms);
- bytes: what crossed ssh (agent → viewer) for that first screen;
- cursor move: in-process, from pressing `j` in the tree to the screen showing the new cursor
  row, and to the inspector showing the new call's cards;
- large activation: from selecting the largest output of the batch to its heatmap drawn.

Without RUN_DIR it records the image-classifier example first (2 steps). Needs tmux and,
for the ssh figures, OpenSSH's sshd (tests/sshd.py starts it on 127.0.0.1).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import io
import os
import pty
import re
import shlex
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import textwrap
import threading
import time
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
TVIS = str(Path(sys.executable).with_name("tvis"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "tui"))

import support  # noqa: E402  (tests/support.py: records the example as the tests do)

REFERENCE_LOOP = 3_000_000
"""Additions in ``interpreter_line``'s loop: ~0.1 s in Debian 12's python3.11 on a 2-core VM."""


def interpreter_line() -> str:
    """Which Python the figures are of, and how fast it runs plain Python code on this
    machine: a build without profile-guided optimisation (pyenv's default, for one) runs
    the viewer's code ~1.7× slower, which no change of the viewer's shows."""
    start = time.perf_counter()
    total = 0
    for i in range(REFERENCE_LOOP):
        total += i
    loop_ms = 1000 * (time.perf_counter() - start)
    return (
        f"python {sys.version.split()[0]} ({sys.executable}): "
        f"a loop of {REFERENCE_LOOP:,} additions {loop_ms:.0f} ms"
    )


POLL_S = 0.01
"""How often the terminal is read while waiting: the figures are good to about 10–20 ms."""

COUNTER = textwrap.dedent("""
    # Runs ssh with its stdout relayed, keeping a running count of the bytes in a file.
    import os, subprocess, sys
    count_file, argv = sys.argv[1], sys.argv[2:]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    total = 0
    out = sys.stdout.buffer
    while True:
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        out.write(chunk)
        out.flush()
        total += len(chunk)
        with open(count_file, "w") as f:
            f.write(str(total))
    sys.exit(proc.wait())
""")


def record_example(folder: Path) -> Path:
    """Two steps of the image-classifier example, its data loaded in-process."""
    return support.record_example(
        folder, "image_classifier", "--steps", "2", script_args=("--workers", "0")
    )


def first_screen_complete(screen: str) -> bool:
    """Tree, inspector header, both cards with stats, histograms and heatmaps drawn."""
    return (
        "ShapesCNN" in screen
        and "inputs" in screen
        and "values kept" in screen
        # Both heatmaps: the output's 1×5 plane and 120 rows of the input's 32×32 (square cells).
        and screen.count("▀") > 100
        and "batch 0/" in screen
    )


def first_page_complete(screen: str) -> bool:
    """Replay as it opens: the timeline, the layer list, the sample's picture and its data
    phase (the example's transforms)."""
    return (
        "1 Replay" in screen
        and "b0" in screen
        and "features.2.3" in screen
        and "Normalize.__call__" in screen
        and screen.count("▀") > 100
        and "batch 0/" in screen
    )


def compile_sources() -> None:
    """Write the bytecode of the tvis under test (the one ``tvis`` imports, whatever
    PYTHONPATH says), as installing it would: with PYTHONDONTWRITEBYTECODE set, an edited
    source tree is otherwise compiled again at every start (≈ 0.2 s of 60 modules)."""
    code = (
        "import compileall, os, tvis, tvis.agent, tvis.tui\n"
        "for m in (tvis, tvis.agent, tvis.tui):\n"
        "    compileall.compile_dir(os.path.dirname(m.__file__), quiet=1)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tempfile.gettempdir())


TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _cpu_s(stat_path: str) -> float:
    """User plus system CPU seconds from a /proc ``stat`` file (a process's or a thread's)."""
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def pane_cpu(root_pid: int) -> dict[str, float]:
    """CPU seconds spent so far by the viewer under ``root_pid`` (its main thread, the whole
    process) and by a local agent it started: what the screen cost, whatever the load."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    found: dict[str, float] = {}
    todo = list(children.get(root_pid, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if b"agent" in argv and b"--stdio" in argv:
                found["agent"] = _cpu_s(f"/proc/{pid}/stat")
            elif b"tui" in argv:
                found["viewer"] = _cpu_s(f"/proc/{pid}/stat")
                found["viewer_main"] = _cpu_s(f"/proc/{pid}/task/{pid}/stat")
        except OSError:
            continue
    return found


def tmux_first_screen(
    command: str,
    env: dict[str, str] | None = None,
    first_page: bool = False,
    cpu: list[dict[str, float]] | None = None,
) -> float:
    """Seconds from starting ``command`` in a fresh 120×40 tmux pane to the complete screen:
    Explore's (`2` pressed once Replay shows), or with ``first_page`` Replay's as it opens.
    ``cpu``: gets the CPU the viewer and its agent had spent when the screen completed."""
    socket = f"tvis-bench-{os.getpid()}-{time.monotonic_ns()}"
    clean = {
        k: v for k, v in {**os.environ, **(env or {})}.items() if k not in ("COLUMNS", "LINES")
    }

    def tmux(*args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", socket, *args], capture_output=True, text=True, env=clean, check=True
        ).stdout

    def done() -> float:
        elapsed = time.perf_counter() - start
        if cpu is not None:
            cpu.append(pane_cpu(int(tmux("display-message", "-p", "-t", "main", "#{pane_pid}"))))
        return elapsed

    start = time.perf_counter()
    tmux("new-session", "-d", "-s", "main", "-x", "120", "-y", "40", f"{command}; sleep 60")
    try:
        if first_page:
            while time.perf_counter() - start < 60:
                if first_page_complete(tmux("capture-pane", "-p", "-t", "main")):
                    return done()
                time.sleep(POLL_S)
            raise RuntimeError(
                "the first page never completed:\n" + tmux("capture-pane", "-p", "-t", "main")
            )
        # The viewer opens on Replay; Explore (key 2) is the screen measured, as before.
        while "1 Replay" not in tmux("capture-pane", "-p", "-t", "main"):
            if time.perf_counter() - start > 60:
                raise RuntimeError("the viewer never showed its first page")
            time.sleep(POLL_S)
        tmux("send-keys", "-t", "main", "2")
        while time.perf_counter() - start < 60:
            if first_screen_complete(tmux("capture-pane", "-p", "-t", "main")):
                return done()
            time.sleep(POLL_S)
        raise RuntimeError(
            "the first screen never completed:\n" + tmux("capture-pane", "-p", "-t", "main")
        )
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, env=clean)


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.0005)


def _render(app) -> None:
    """Compose and write the whole screen as the driver would (an upper bound of a repaint)."""
    console = Console(
        width=app.size.width,
        height=app.size.height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )


async def in_process(run: Path, repeat: int) -> dict[str, list[float]]:
    """In the app itself (headless, 120×40): from a cursor move to the new call's cards with
    their heatmaps, and from selecting the batch's largest activation to its heatmap; each
    ends with a full repaint of the screen."""
    from textual import events
    from viewer_support import make_app, open_explore

    from tvis.store.lru import LRU
    from tvis.tui.messages import GotoCall

    def cards_drawn(page, call=None) -> bool:
        shown = page.inspector.shown
        return (
            shown is not None
            and shown is page.inspector.selection
            and (call is None or shown.call == call)
            and bool(page.inspector.cards)
            and all(c.has_data for c in page.inspector.cards)
        )

    figures: dict[str, list[float]] = {"cursor_inspector": [], "large_activation": []}
    app = make_app(run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        tree = page.calls.call_tree
        await _until(lambda: len(tree.call_nodes()) >= 5)  # the model opens on its layers
        await pilot.press("j")
        for _ in range(repeat):
            for key in ("j", "k"):
                await _until(lambda: cards_drawn(page))
                before = tree.cursor_line
                t0 = time.perf_counter()
                app._driver.send_message(events.Key(key, key))
                await _until(lambda before=before: tree.cursor_line != before)
                await _until(lambda: cards_drawn(page))
                _render(app)
                figures["cursor_inspector"].append(time.perf_counter() - t0)
        largest = app.data.call(
            "layers", run=app.run_name, batch=0, sort="out_numel", desc=True, limit=1
        )["rows"][0]
        for _ in range(repeat):
            tree.move_cursor(tree.root.children[0])
            await pilot.pause(0.2)
            # Count the agent's work too, not a cached answer: an empty cache of the same size.
            app.data._cache = LRU(app.data._cache.size)
            t0 = time.perf_counter()
            page.post_message(GotoCall(largest["id"], batch=0))
            await _until(lambda: cards_drawn(page, largest["id"]))
            _render(app)
            figures["large_activation"].append(time.perf_counter() - t0)
    figures["largest_numel"] = [float(largest.get("out_numel") or 0)]
    return figures


ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


SETTLED_S = 0.15
"""A screen is settled when the viewer has written nothing more for this long."""


class PtyViewer:
    """`tvis tui TARGET` on a pseudo-terminal of its own (120×40), its output collected with
    the time each chunk arrived: what the terminal receives, without a terminal between."""

    def __init__(self, target: str, extra: list[str] | None = None, env: dict | None = None):
        pid, fd = pty.fork()
        if pid == 0:
            child = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
            child.update(TERM="xterm-256color", TVIS_IMAGES="halfcell", **(env or {}))
            os.execvpe(TVIS, [TVIS, "tui", target, *(extra or [])], child)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.pid, self.fd = pid, fd
        self.chunks: list[tuple[float, bytes]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.chunks.append((time.perf_counter(), data))

    def bytes_since(self, t0: float) -> int:
        with self._lock:
            return sum(len(d) for t, d in self.chunks if t >= t0)

    def text_since(self, t0: float) -> tuple[str, float]:
        """The plain text written since ``t0`` and when its last chunk arrived."""
        with self._lock:
            recent = [(t, d) for t, d in self.chunks if t >= t0]
        raw = b"".join(d for _, d in recent)
        return ANSI.sub(b"", raw).decode("utf-8", "replace"), (recent[-1][0] if recent else t0)

    def wait_for(self, text: str, t0: float, timeout: float = 30.0) -> float:
        """Seconds from ``t0`` until ``text`` has been written (escape codes removed)."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            seen, last = self.text_since(t0)
            if text in seen:
                return last - t0
            time.sleep(0.001)
        raise RuntimeError(f"{text!r} was never written")

    def wait_settled(self, t0: float, timeout: float = 30.0) -> float:
        """Seconds from ``t0`` to the last chunk written before SETTLED_S of silence."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            _, last = self.text_since(t0)
            if last > t0 and time.perf_counter() - last >= SETTLED_S:
                return last - t0
            time.sleep(0.002)
        raise RuntimeError("the screen never settled")

    def press(self, key: str) -> float:
        t0 = time.perf_counter()
        os.write(self.fd, key.encode())
        return t0

    def close(self) -> None:
        os.write(self.fd, b"q")
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def terminal_cursor_moves(viewer: PtyViewer, repeat: int) -> dict[str, list[float]]:
    """From writing a key to the viewer's terminal until it has written (a) the tree rows
    with the moved cursor, (b) the inspector header of the call the cursor moved to, and
    (c) everything it writes for that move (the screen settled: cards, heatmaps), and how
    many bytes that was (what a slow link carries per move); then (d) the inspector's own
    keys: focus it and step through its tensor cards, settled."""
    kinds = ("tree_row", "header", "settled", "bytes", "card")
    figures: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=60)  # the viewer opens on Replay
        viewer.press("2")  # Explore
        viewer.wait_for("values kept", 0.0, timeout=60)
        viewer.wait_for("features", 0.0)  # the model opens on its layers
        time.sleep(0.5)
        for _ in range(repeat):
            for key, header in (("j", "Sequential  features"), ("k", "ShapesCNN   forward")):
                t0 = viewer.press(key)
                # Both rows whose cursor state changed are redrawn: ShapesCNN and features.
                figures["tree_row"].append(viewer.wait_for("■ features Sequential", t0))
                figures["header"].append(viewer.wait_for(header, t0))
                figures["settled"].append(viewer.wait_settled(t0))
                figures["bytes"].append(viewer.bytes_since(t0))
        viewer.wait_settled(viewer.press("i"))
        for _ in range(repeat):
            for key in ("j", "k"):
                figures["card"].append(viewer.wait_settled(viewer.press(key)))
        return figures
    finally:
        viewer.close()


def ssh_figures(
    run: Path, repeat: int, moves_only: bool = False, screens_only: bool = False
) -> tuple[list[float], list[float], int, dict[str, list[float]]]:
    from sshd import start_lab

    with tempfile.TemporaryDirectory(prefix="tvis-bench-ssh-") as folder:
        lab = start_lab(Path(folder))
        try:
            remote = ["--remote-tvis", lab.remote_tvis]
            env = {k: lab.env[k] for k in ("TVIS_SSH_COMMAND", "XDG_RUNTIME_DIR")}
            moves = {}
            if not screens_only:
                moves = terminal_cursor_moves(PtyViewer(f"tvis-test:{run}", remote, env), repeat)
            if moves_only:
                return [], [], 0, moves
            counter = Path(folder) / "counter.py"
            counter.write_text(COUNTER)
            count_file = Path(folder) / "bytes"
            ssh = f"{sys.executable} {counter} {count_file} ssh -F {lab.config}"
            command = (
                f"{TVIS} tui tvis-test:{shlex.quote(str(run))} "
                f"--remote-tvis {shlex.quote(lab.remote_tvis)}"
            )
            times, pages = [], []
            for _ in range(repeat):
                count_file.write_text("0")
                # The shared connection lives in the lab's folder, so closing the lab ends it.
                times.append(tmux_first_screen(command, {**env, "TVIS_SSH_COMMAND": ssh}))
                received = int(count_file.read_text() or 0)
                pages.append(tmux_first_screen(command, env, first_page=True))
            return times, pages, received, moves
        finally:
            lab.close()


def summary(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"median {statistics.median(ms):.0f} ms (min {ms[0]:.0f}, max {ms[-1]:.0f}, n={len(ms)})"


def print_cpu(what: str, marks: list[dict[str, float]]) -> None:
    """The CPU spent by the time each screen completed (medians): less noisy than the wall
    time on a loaded machine, and what the two cores have to give before the screen."""
    parts = []
    for key, label in (
        ("viewer_main", "viewer's main thread"),
        ("viewer", "viewer"),
        ("agent", "agent"),
    ):
        values = [m[key] for m in marks if key in m]
        if values:
            parts.append(f"{label} {statistics.median(values) * 1000:.0f} ms")
    print(f"  {what}, CPU spent by then: " + ", ".join(parts) + f" (n={len(marks)})")


def print_moves(where: str, keys: dict[str, list[float]]) -> None:
    print(f"[{where}] tree move, row drawn:      {summary(keys['tree_row'])}   (target ≤ 50 ms)")
    print(f"[{where}] tree move, inspector header: {summary(keys['header'])}")
    print(f"[{where}] tree move, screen settled: {summary(keys['settled'])}   (target ≤ 50 ms)")
    kib = sorted(b / 1024 for b in keys["bytes"])
    print(f"[{where}] tree move, bytes written:  median {statistics.median(kib):.1f} KiB")
    print(f"[{where}] inspector card, settled:   {summary(keys['card'])}   (target ≤ 50 ms)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", nargs="?", help="a recorded run (default: record the example)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-ssh", action="store_true", help="skip the loopback sshd figures")
    parser.add_argument(
        "--moves-only", action="store_true", help="only the keys on a pty (tree moves, cards)"
    )
    parser.add_argument(
        "--screens-only", action="store_true", help="only the first screens (no keys, in-process)"
    )
    args = parser.parse_args()
    print(interpreter_line())
    compile_sources()
    with tempfile.TemporaryDirectory(prefix="tvis-bench-") as tmp:
        run = Path(args.run) if args.run else record_example(Path(tmp))
        if args.moves_only:
            print_moves("local", terminal_cursor_moves(PtyViewer(str(run)), args.repeat))
            if not args.no_ssh:
                print_moves("loopback ssh", ssh_figures(run, args.repeat, moves_only=True)[3])
            return 0
        command = f"{TVIS} tui {shlex.quote(str(run))}"
        local, pages = [], []
        local_cpu: list[dict[str, float]] = []
        pages_cpu: list[dict[str, float]] = []
        for _ in range(args.repeat):
            local.append(tmux_first_screen(command, cpu=local_cpu))
            pages.append(tmux_first_screen(command, first_page=True, cpu=pages_cpu))
        print(f"first screen, local:        {summary(local)}   (target ≤ 500 ms)")
        print_cpu("first screen", local_cpu)
        print(f"first page (Replay), local: {summary(pages)}")
        print_cpu("first page", pages_cpu)
        if not args.screens_only:
            print_moves("local", terminal_cursor_moves(PtyViewer(str(run)), args.repeat))
        if not args.no_ssh:
            remote, remote_pages, received, moves = ssh_figures(
                run, args.repeat, screens_only=args.screens_only
            )
            print(f"first screen, loopback ssh: {summary(remote)}   (target ≤ 1000 ms)")
            print(f"first page (Replay), ssh:   {summary(remote_pages)}")
            print(f"bytes over ssh, first screen: {received / 1024:.1f} KiB   (target ≤ 256 KiB)")
            if not args.screens_only:
                print_moves("loopback ssh", moves)
        if args.screens_only:
            return 0
        figures = asyncio.run(in_process(run, args.repeat))
        print(f"cursor move, cards drawn:   {summary(figures['cursor_inspector'])}   (in-process)")
        print(
            f"largest activation ({int(figures['largest_numel'][0]):,} values): "
            f"{summary(figures['large_activation'])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
