"""Every key a user presses in normal use, on every page, to a settled screen.

    .venv/bin/python bench/keys_bench.py RUN [--repeat 3] [--pages 1,2,3,4,5,6] [--cold-layers]
                                         [--first-visits S]

Drives a real `tvis tui RUN` on a pseudo-terminal of its own (120×40, `tui_bench.PtyViewer`)
and, for each page of the tab bar, switches to it (`1`–`7`) and presses the keys of that
page's help: the tree's, the lists', the layers table's, the inspector's, Replay's, Loss's,
Weights', Insights' and Live's, plus `g`, `.`/`,`, `[`/`]`, `Tab`, `Enter` and `/`. Each
figure is from writing the key to the last byte the viewer writes before 150 ms of silence
(`tui_bench.SETTLED_S`), pointer-shape sequences aside (``draws``); a key after which
nothing is written within 1 s reads as "—" (it changed nothing on screen), and each key is pressed only after 0.5 s of silence. Keys that toggle or cycle are pressed until they come back, so
every state is timed and the next key finds the page as a user left it. The table is
sorted slowest first, by the median over ``--repeat`` rounds (a round visits every page);
its cpu column is the viewer's CPU time (all its threads, ``/proc/PID/task/*/schedstat``)
from the key to the settled screen's detection, which a loaded machine stretches less than
the wall time (the agent runs in a process of its own, so a key waiting on it shows here
only as the viewer's own work); a last line gives the viewer's and its agent's CPU over
the whole sweep (what fetching ahead at rest costs, which no key's figure shows).

``--viewer-keys READY_S`` presses the keys that need nothing new from the agent's store
(`VIEWER_KEYS`: Explore's pane keys, mode, search, help, tree; the other pages' help)
in a real `tvis tui` left READY_S on its first page first (so every page has been built
ahead, as a user who has read the first screen finds them), each after 0.5 s of silence,
in ``--repeat`` fresh viewers: per key, the wall time to a settled screen and the viewer's
main thread's CPU time meanwhile (``/proc/PID/schedstat``: the figure a loaded machine
stretches least).

``--weights-list`` times, in the app itself (headless, 120×40), the Weights page from `4`
to its list filled, then `j`, `k`, `G`, `g`, PageDown, PageUp and `o`/`O` in the list, each
to the app idle again.

``--weights-terminal WAIT`` presses the Weights list's keys in a real `tvis tui` (WAIT s
after its list appears: j ×6, k ×2, G, g, o, o, O) and gives, per key, the first byte
written, the screen settled and the viewer's CPU per press (``/proc``; the agent runs in a
process of its own).

``--weights-all`` times, in the app itself (headless, 120×40), Weights' `a` (a thumbnail of
every parameter) from the key to the app idle again (wall and main-thread CPU), with the
widgets under the grid, the thumbnails that asked for their pictures and the memory it took.

``--attention-terminal`` presses Insights' Attention cursor keys (j ×6, k ×3, l, h) in a
real `tvis tui` of a vision model's run (a ViT: each row brings the overlay of where its
query looks) and gives the same three figures per key.

``--picture-keys weights|insights`` times, in the app itself (headless, 120×40), Weights'
list keys (j, k, PageDown, PageUp, G, g), Attention's cursor (j, k; a ViT's run) or the
Embeddings' point (j, k: the sample every page follows), each
after a 1 s rest, from the key to its picture on screen, wall and CPU; ``--repeat`` rounds;
``--latency MS`` adds MS to every request (a slow ssh link's round trip).

``--first-keys PAGE:KEY,…`` presses each KEY once on PAGE (`1:n` Replay's `n`, `2:d`
Explore's `d`), in ``--repeat`` fresh viewers left to rest on that page first: per key, the
wall time to a settled screen and the main thread's CPU time (a pane's or a view's first
opening; the project of `bench/scripts/long_model.py` for the Source pane on a long file).

``--gaps N`` opens a fresh `tvis tui`, switches to each page of ``--pages`` (default 3,
Loss) as soon as the first page has settled — its other pages not built ahead yet — and
presses N keys of its list (`j`, `k`) at gaps of 0.2–1.0 s (``GAPS_S``), ``--repeat``
viewers: per gap, the wall time to a settled screen and the main thread's CPU time. Keys
after a gap longer than the quiet spell land on work done ahead (a page's build, its
layout, the help's drawing).

``--switch-walk N`` presses Explore's `.` N times (batches not shown before), then `,` N
times, 1 s apart, each to a settled screen.

``--switch-after-visits 2,3,4,5`` visits those pages first (each to a settled screen and
1 s of reading), then each page of ``--pages`` (default 3, Loss) in a viewer of its own, and
there presses `.` and `,` in turn ``--repeat`` times each: per key, the wall time to a
settled screen and the viewer's CPU time over that span (``/proc``: every thread of the
`tvis tui` process, so it counts what hidden pages do under the key; the agent is another
process). Compare with ``--switch-after-visits 0`` (no page visited first).

``--cold-layers`` instead times the layers table on a batch the agent has not read yet:
`2` then `y` as soon as the Explore page has drawn anything, to the table's rows on screen
and to the screen settled (the 20,000-call run of `bench/layers_bench.py` is the case).
With ``--after-settle``, `y` waits until Explore's screen has settled and 1 s more: the
layers pane alone, without Explore's own first build and requests. Each figure comes with
the viewer's main thread from `y` to the rows: its time on a CPU, and its time ready but
waiting for one (``/proc/PID/schedstat``), which is what a loaded machine adds.

Run it from outside the worktree with ``PYTHONPATH`` naming the sources to measure (the
viewer under test is the `tvis tui` the bench starts, which inherits it).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tui_bench import SETTLED_S, PtyViewer, interpreter_line, pane_cpu  # noqa: E402

NOTHING_S = 1.0
"""A key after which the viewer writes nothing for this long changed nothing on screen."""

QUIET_S = 0.5
"""Silence waited for before each key (not timed), so that an answer of the agent arriving
late for one key is not counted as the next key's drawing."""

POINTER_SHAPE = re.compile(rb"\x1b\]22;[^\x07\x1b]*(?:\x07|\x1b\\)")
"""Textual's pointer-shape sequence (OSC 22), written by every screen as it mounts: a page
built ahead in a quiet spell writes it, 13 bytes that change nothing on screen. A key that
draws nothing was timed to that write (Replay's `v` on a batch loading: "681 ms")."""


def draws(chunk: bytes) -> bool:
    """Whether ``chunk`` changes the screen (anything but pointer-shape sequences)."""
    return bool(POINTER_SHAPE.sub(b"", chunk))


VISIT_SETTLED_S = 0.6
"""The silence that ends a first visit (``--first-visits``): longer than the wait between
a page's frame and its content."""

KEYS = {
    "down": "\x1b[B",
    "up": "\x1b[A",
    "right": "\x1b[C",
    "left": "\x1b[D",
    "home": "\x1b[H",
    "end": "\x1b[F",
    "pagedown": "\x1b[6~",
    "pageup": "\x1b[5~",
    "shift+up": "\x1b[1;2A",
    "shift+down": "\x1b[1;2B",
    "shift+right": "\x1b[1;2C",
    "shift+left": "\x1b[1;2D",
    "tab": "\t",
    "enter": "\r",
    "escape": "\x1b",
    "backspace": "\x7f",
    "space": " ",
    "comma": ",",  # for --first-keys, whose list is comma-separated
    "full_stop": ".",  # Textual's name, as frames_bench.py takes it
}
"""What a terminal sends for the keys that are not one printable character."""


@dataclass(frozen=True)
class Press:
    label: str  # what the table shows, e.g. "j (tree)"
    key: str  # a printable character or a name in KEYS
    timed: bool = True


def _p(label: str, key: str | None = None, timed: bool = True) -> Press:
    return Press(label, key if key is not None else label.split()[0], timed)


def _keys(*labels: str) -> list[Press]:
    return [_p(label) for label in labels]


# What a user presses on each page, in an order that leaves the page as it was found.
# The first word of a label is the key (a name in KEYS or one character).
REPLAY = [
    *_keys("l step", "l step", "h step", "h step", "n phase"),
    *_keys("v view", "v view", "v view"),  # on the first layer: its views show
    *_keys("N phase", "z size", "z size", "z size", "z size"),
    *_keys("end end", "home start"),
    *_keys("pagedown neurons", "pageup neurons"),
    *_keys("+ speed", "- speed"),
    *_keys("o light", "o light"),
    *_keys("] sample", "[ sample", "g grad", "g grad"),
    *_keys(". batch", ", batch"),
    *_keys("? help"),
    _p("escape help", "escape", timed=False),
    *_keys("enter explore"),
    _p("1", "1", timed=False),
]

EXPLORE = [
    *_keys("j tree", "k tree", "j tree", "l tree", "h tree", "space tree", "space tree"),
    *_keys("end tree", "home tree", "pagedown tree", "pageup tree", "k tree"),
    *_keys("enter tree", "g grad", "g grad", "] sample", "[ sample"),
    *_keys("i inspector", "j card", "j card", "k card", "k card", "> index", "< index"),
    *_keys("v view", "v view", "v view", "c tree", "tab focus"),
    *_keys("s source", "j source", "k source", "n source", "N source", "F source", "c tree"),
    *_keys("y layers", "j layers", "k layers", "G layers", "g layers", "o layers", "O layers"),
    *_keys("enter layers", "y layers"),
    *_keys("t timeline", "l timeline", "h timeline", "j timeline", "k timeline"),
    *_keys("+ timeline", "- timeline", "enter timeline"),
    *_keys("p step", "j step", "k step", "a samples", "j samples", "k samples", "c tree"),
    *_keys("m mode", "m mode", "f filter", "f filter", "f filter", "f filter"),
    *_keys("d def", "u site", "c tree", "/ search"),
    _p("escape search", "escape"),
    *_keys(". batch", ", batch", "? help"),
    _p("escape help", "escape", timed=False),
]

LOSS = [
    *_keys("j list", "j list", "k list", "G list", "g list", "o sort", "o sort"),
    *_keys("l token", "h token", "shift+right cell", "shift+down cell"),
    *_keys("shift+left cell", "shift+up cell", "b scope", "b scope"),
    *_keys("enter row", ". batch", ", batch", "tab focus", "? help"),
    _p("escape help", "escape", timed=False),
    *_keys("u loss call"),
    _p("3", "3", timed=False),
]

WEIGHTS = [
    *_keys("j list", "j list", "k list", "G list", "g list", "enter row"),
    *_keys("w which", "w which", "w which", "n step", "p step"),
    *_keys("o sort", "o sort", "O sort", "O sort", "a all", "a all", "> filters", "< filters"),
    *_keys(". batch", ", batch", "tab focus", "? help"),
    _p("escape help", "escape", timed=False),
]

INSIGHTS = [
    *_keys("l cursor", "h cursor", "j cursor", "k cursor", "> layer", "< layer"),
    *_keys("m mode", "m mode", "m mode", "t which", "t which"),
    *_keys("a attention", "{ head", "} head", "o rollout", "o rollout", "w heads", "w heads"),
    *_keys("e embeddings", "j cursor", "k cursor", "/ search"),
    _p("escape search", "escape"),
    *_keys("c gradcam", ". batch", ", batch", "? help"),
    _p("escape help", "escape", timed=False),
]

LIVE = [
    *_keys("j list", "k list", "] newer", "[ older", "end newest", "f rank", "? help"),
    _p("escape help", "escape", timed=False),
]

RANKS = [*_keys("j list", "k list", "x failure", "enter row")]

PAGE_KEYS = {
    "Replay": REPLAY,
    "Explore": EXPLORE,
    "Loss": LOSS,
    "Weights": WEIGHTS,
    "Insights": INSIGHTS,
    "Ranks": RANKS,
    "Live": LIVE,
}


def tab_titles(viewer: PtyViewer) -> list[str]:
    """The pages of the tab bar as the viewer wrote it ("1 Replay  2 Explore …")."""
    seen, _ = viewer.text_since(0.0)
    titles = []
    for n in range(1, 10):
        found = [name for name in PAGE_KEYS if f"{n} {name}" in seen]
        if not found:
            break
        titles.append(found[0])
    return titles


def settle(viewer: PtyViewer, t0: float, silence: float = SETTLED_S) -> float | None:
    """Seconds from ``t0`` to the last byte written before ``silence`` s of silence; None
    when nothing at all is written within NOTHING_S."""
    deadline = t0 + 60.0
    while time.perf_counter() < deadline:
        if os.waitpid(viewer.pid, os.WNOHANG)[0]:
            text, _ = viewer.text_since(t0)
            raise RuntimeError(f"the viewer exited; its last output:\n{text[-3000:]}")
        with viewer._lock:
            recent = [t for t, chunk in viewer.chunks if t >= t0 and draws(chunk)]
        now = time.perf_counter()
        if not recent:
            if now - t0 >= NOTHING_S:
                return None
        elif now - recent[-1] >= silence:
            return recent[-1] - t0
        time.sleep(0.002)
    raise RuntimeError("the screen never settled")


def quiet(viewer: PtyViewer) -> None:
    """Wait for QUIET_S of silence: the previous key's late drawing belongs to it."""
    while True:
        with viewer._lock:
            last = viewer.chunks[-1][0] if viewer.chunks else 0.0
        if time.perf_counter() - last >= QUIET_S:
            return
        time.sleep(0.01)


def press(viewer: PtyViewer, key: str) -> float:
    quiet(viewer)
    return viewer.press(KEYS.get(key, key))


TOTAL_CPU: dict[str, float] = {}
"""``sweep``'s CPU seconds over the whole sweep: the viewer's and its agent's (what
fetching ahead at rest costs shows here, not in a key's figure)."""


def threads_cpu_s(pid: int) -> float:
    """CPU seconds every live thread of process ``pid`` has run (``/proc/PID/task/*/
    schedstat``, in ns: fine enough for one key, unlike ``/proc/PID/stat``'s ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def sweep(
    run: str, repeat: int, pages: list[int] | None, cpu: dict[tuple[str, str], list] | None = None
) -> dict[tuple[str, str], list]:
    """Per (page, key label): the settle times of each press (None: nothing written); and
    into ``cpu``, the viewer's CPU seconds from each key to its screen settled."""
    viewer = PtyViewer(run)
    figures: dict[tuple[str, str], list] = {}
    cpu = {} if cpu is None else cpu
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        time.sleep(0.5)
        titles = tab_titles(viewer)
        chosen = [n for n in range(1, len(titles) + 1) if pages is None or n in pages]
        start = cpu_s(viewer.pid), pane_cpu(viewer.pid).get("agent", 0.0)
        for round_ in range(repeat):
            for n in chosen:
                title = titles[n - 1]
                label = f"{n} (page, first visit)" if round_ == 0 else f"{n} (page)"
                figures.setdefault((title, label), []).append(settle(viewer, press(viewer, str(n))))
                for step in PAGE_KEYS[title]:
                    quiet(viewer)
                    cpu0 = threads_cpu_s(viewer.pid)
                    t0 = viewer.press(KEYS.get(step.key, step.key))
                    try:
                        took = settle(viewer, t0)
                    except RuntimeError as e:
                        raise RuntimeError(
                            f"round {round_ + 1}, {title}, {step.label}: {e}"
                        ) from None
                    if step.timed:
                        figures.setdefault((title, step.label), []).append(took)
                        spent = threads_cpu_s(viewer.pid) - cpu0
                        cpu.setdefault((title, step.label), []).append(spent)
        TOTAL_CPU["viewer"] = cpu_s(viewer.pid) - start[0]
        TOTAL_CPU["agent"] = pane_cpu(viewer.pid).get("agent", 0.0) - start[1]
        return figures
    finally:
        try:
            viewer.close()
        except (OSError, ChildProcessError):
            pass  # it had exited already


def first_visits(
    run: str, pages: list[int] | None, read_s: float, cpu: dict[str, float] | None = None
) -> dict[str, float | None]:
    """Per page: its first visit, pressed ``read_s`` after the page before it settled (a
    user reading it; the viewer may build pages ahead meanwhile), seconds to the last byte
    before VISIT_SETTLED_S of silence: a page built on its visit draws its frame, then its
    content after the agent answers, up to ~0.4 s apart (150 ms cut it at the frame); and
    into ``cpu``, the viewer's main thread's CPU seconds over that span."""
    viewer = PtyViewer(run)
    figures: dict[str, float | None] = {}
    cpu = {} if cpu is None else cpu
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        titles = tab_titles(viewer)
        for n in [n for n in range(2, len(titles) + 1) if pages is None or n in pages]:
            while True:  # read_s of silence: the page before has settled and been read
                with viewer._lock:
                    last = viewer.chunks[-1][0] if viewer.chunks else 0.0
                if time.perf_counter() - last >= read_s:
                    break
                time.sleep(0.01)
            ran0, _ = main_thread_s(viewer.pid)
            t0 = viewer.press(str(n))
            figures[f"{n} {titles[n - 1]}"] = settle(viewer, t0, VISIT_SETTLED_S)
            cpu[f"{n} {titles[n - 1]}"] = main_thread_s(viewer.pid)[0] - ran0
        return figures
    finally:
        try:
            viewer.close()
        except (OSError, ChildProcessError):
            pass


def main_thread_s(pid: int) -> tuple[float, float]:
    """Seconds the process's main thread has run on a CPU, and waited for one while ready
    (``/proc/PID/schedstat``): what a loaded machine adds to a figure is the second."""
    ran, waited, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    return int(ran) / 1e9, int(waited) / 1e9


def cold_layers(run: str, after_settle: bool = False) -> tuple[float, float, float, float, float]:
    """`y` right after Explore first draws (its batch not yet read by the agent): seconds to
    the table's rows on screen and to the screen settled, and the viewer's main thread from
    `y` to the rows: seconds on a CPU, seconds waiting for one; and seconds from `2` to the
    rows (what a user who presses `2` then `y` waits, whenever Explore's first write came)."""
    viewer = PtyViewer(run)
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        t_page = press(viewer, "2")
        viewer.wait_for("Explore", t_page, timeout=60)
        if after_settle:
            viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
            time.sleep(1.0)
        ran0, waited0 = main_thread_s(viewer.pid)
        t0 = viewer.press("y")  # at once, not after a quiet moment
        rows = viewer.wait_for("layers · call order", t0, timeout=120)  # the caption, once filled
        ran, waited = main_thread_s(viewer.pid)
        from_page = t0 + rows - t_page
        return rows, viewer.wait_settled(t0, timeout=120), ran - ran0, waited - waited0, from_page
    finally:
        viewer.close()


VIEWER_KEYS = {
    "Explore": "s c a c p c y c t c d c m m end home / escape ? escape space space",
    "Loss": "? escape",
    "Weights": "? escape",
    "Insights": "? escape",
    "Live": "? escape",
}
"""``--viewer-keys``: the keys that need nothing new from the agent's store, per page, each
pressed once from the page as it was left (a pane's key, then `c` back to the tree)."""


def viewer_keys(run: str, ready_s: float) -> dict[tuple[str, str], tuple[float | None, float]]:
    """In a real `tvis tui` left ``ready_s`` on Replay first (every page built ahead by
    then), VIEWER_KEYS page by page, each key after QUIET_S of silence: per (page, key
    #n), seconds to a settled screen and the viewer's main thread's CPU seconds meanwhile."""
    viewer = PtyViewer(run)
    figures: dict[tuple[str, str], tuple[float | None, float]] = {}
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        time.sleep(ready_s)
        titles = tab_titles(viewer)
        for title, keys in VIEWER_KEYS.items():
            if title not in titles:
                continue
            settle(viewer, press(viewer, str(titles.index(title) + 1)), VISIT_SETTLED_S)
            time.sleep(1.0)
            for i, key in enumerate(keys.split()):
                quiet(viewer)
                ran0, _ = main_thread_s(viewer.pid)
                took = settle(viewer, viewer.press(KEYS.get(key, key)))
                figures[(title, f"{i + 1:>2} {key}")] = (took, main_thread_s(viewer.pid)[0] - ran0)
        return figures
    finally:
        viewer.close()


def first_key(run: str, page: str, key: str) -> tuple[float | None, float]:
    """In a fresh `tvis tui`, page ``page`` (1: Replay, where it opens) shown and left to
    rest ``FIRST_KEY_REST_S`` (what it fetches ahead fetched), then ``key`` pressed once:
    seconds to a settled screen, and the viewer's main thread's CPU seconds meanwhile."""
    viewer = PtyViewer(run)
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        if page != "1":
            settle(viewer, press(viewer, page), VISIT_SETTLED_S)
        time.sleep(FIRST_KEY_REST_S)
        quiet(viewer)
        ran0, _ = main_thread_s(viewer.pid)
        took = settle(viewer, viewer.press(KEYS.get(key, key)))
        return took, main_thread_s(viewer.pid)[0] - ran0
    finally:
        viewer.close()


FIRST_KEY_REST_S = 1.5
"""``--first-keys``: the rest before the key, longer than every page's prefetch delay."""


def weights_all(run: str, timeout: float) -> str:
    """Weights' `a` in the headless app, once its list is filled: a sentence of figures."""
    import asyncio
    import resource

    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "tests"), str(root / "tests" / "tui")]
    from viewer_support import goto_page, make_app, open_explore, wait_for

    from tvis.tui.pages.weights import AllLayers, ParamList, WeightsView

    async def measure() -> str:
        app = make_app(Path(run).parent)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_explore(pilot)
            await goto_page(pilot, "weights")
            table = await wait_for(pilot, lambda: app.screen.query_one(ParamList), "the list")
            await wait_for(pilot, lambda: table.row_count, "the list's rows", timeout=600)
            await pilot.pause(1.0)
            view = app.screen.query_one(WeightsView)
            # The thumbnails' grid: one line widget, or (before it, and in sixel or kitty)
            # a scroll of thumbnail widgets.
            grid = getattr(view, "grid", None) or app.screen.query_one(AllLayers)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            t0, cpu0 = time.perf_counter(), time.thread_time()
            await pilot.press("a")  # Pilot returns once the app is idle: laid out, painted
            took, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
            await wait_for(pilot, lambda: grid.loaded_count, "a thumbnail", timeout=timeout)
            grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
            widgets = len(list(grid.walk_children()))
            return (
                f"weights a: to idle {took * 1000:.0f} ms (main thread CPU {cpu * 1000:.0f} ms), "
                f"{type(grid).__name__} with {widgets} widgets under it, {grid.loaded_count} "
                f"thumbnails asked for {table.row_count} parameters, peak memory +{grown:.0f} MB"
            )

    return asyncio.run(measure())


def weights_list(run: str, timeout: float) -> str:
    """The Weights page in the headless app: from `4` to its list filled, then each list
    key to the app idle again (Pilot waits for that): a sentence of figures."""
    import asyncio

    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "tests"), str(root / "tests" / "tui")]
    from viewer_support import goto_page, make_app, open_explore, wait_for

    from tvis.tui.pages.weights import ParamList

    async def measure() -> str:
        app = make_app(Path(run).parent)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_explore(pilot)
            await pilot.pause(1.0)
            t0 = time.perf_counter()
            await goto_page(pilot, "weights")
            table = await wait_for(pilot, lambda: app.screen.query_one(ParamList), "the list")
            await wait_for(pilot, lambda: table.row_count, "the list's rows", timeout=timeout)
            await pilot.pause()
            figures = [f"page to list filled {(time.perf_counter() - t0) * 1000:.0f}"]
            for key in ("j", "j", "k", "G", "g", "pagedown", "pageup", "o", "o", "O"):
                await pilot.pause(0.5)
                t0 = time.perf_counter()
                await pilot.press(key)
                figures.append(f"{key} {(time.perf_counter() - t0) * 1000:.0f}")
            return f"{table.row_count} parameters, ms: " + ", ".join(figures)

    return asyncio.run(measure())


def picture_keys(run: str, page: str, rounds: int, latency_ms: float) -> list[str]:
    """In the headless app (120×40): Weights' list keys or Attention's cursor keys, each
    pressed after a 1 s rest, timed from the key to its picture on screen (the parameter's
    picture and statistics; the overlay of where the query looks), wall and the process's
    CPU (the viewer's threads; the agent runs in a process of its own). ``latency_ms``
    is added to every request, as a slow ssh link adds its round trip."""
    import asyncio

    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "tests"), str(root / "tests" / "tui")]
    from viewer_support import goto_page, make_app, open_explore, screen_text, wait_for

    async def drawn(app, done) -> tuple[float, float, float]:
        # The key's action run as its binding runs it (Pilot's press adds its own waits).
        t0, c0 = time.perf_counter(), time.process_time()
        await app.run_action(BINDINGS[key_now[0]], app.focused)
        while not done():
            await asyncio.sleep(0.0005)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        await asyncio.sleep(AFTER_S)  # what the key set off while the keys have not rested
        return wall, cpu, time.process_time() - c0

    key_now = [""]
    figures: dict[str, list[tuple[float, float, float]]] = {}
    lists = {"j": "cursor_down", "k": "cursor_up", "pagedown": "page_down", "pageup": "page_up"}
    BINDINGS = {**lists, "G": "last_row", "g": "first_row"}

    async def measure() -> None:
        app = make_app(Path(run))
        async with app.run_test(size=(120, 40)) as pilot:
            if page == "embeddings":  # a user who has read Explore: it follows from then on
                await open_explore(pilot)
            await goto_page(pilot, "insights" if page == "embeddings" else page)
            call = app.data.client.call

            def slow_link(method: str, **params: object) -> object:
                time.sleep(latency_ms / 1000)
                return call(method, **params)

            app.data.client.call = slow_link
            await pilot.pause(2.0)
            if page == "weights":
                from tvis.tui.pages.weights import LayerView, ParamList

                table, layer = app.screen.query_one(ParamList), app.screen.query_one(LayerView)
                table.focus()
                walk = ["j", "j", "j", "k", "pagedown", "pageup", "G", "g"] * rounds

                def done() -> bool:
                    name = table.params[table.cursor_row]["name"]
                    return (layer.shown or {}).get("name") == name and layer.stats is not None

            elif page == "insights":
                await pilot.press("a")
                view = await wait_for(pilot, lambda: app.screen.current_view(), "attention")
                await wait_for(pilot, lambda: "looks" in screen_text(app), "the overlay")
                walk = ["j", "j", "j", "k", "k", "k"] * rounds
                BINDINGS.update({"j": "screen.move(1, 0)", "k": "screen.move(-1, 0)"})

                def done() -> bool:
                    token = view.reply["tokens"][view.cursor[0]]
                    note = view.query_one("#attention-overlay-note").render()
                    return f"where {token} looks" in str(note)

            else:  # Embeddings: a point chosen is the sample every page follows
                await pilot.press("e")
                view = await wait_for(pilot, lambda: app.screen.current_view(), "embeddings")
                await wait_for(pilot, lambda: view.reply, "the projection")
                walk = ["j", "j", "j", "k", "k", "k"] * rounds
                BINDINGS.update({"j": "screen.move(1, 0)", "k": "screen.move(-1, 0)"})
                followed = [app.sample]

                def done() -> bool:
                    moved, followed[0] = app.sample != followed[0], app.sample
                    return moved

            for key in walk:
                await pilot.pause(1.0)
                if page == "weights":
                    layer.stats = None  # set again by the move's statistics
                key_now[0] = key
                figures.setdefault(key, []).append(await drawn(app, done))

    asyncio.run(measure())
    return [
        f"{key}: to the picture {' · '.join(f'{w * 1000:.0f}' for w, _, _ in v)} ms "
        f"(median {statistics.median(w for w, _, _ in v) * 1000:.0f}), "
        f"CPU median {statistics.median(c for _, c, _ in v) * 1000:.0f} ms, "
        f"with the next {AFTER_S}s {statistics.median(a for _, _, a in v) * 1000:.0f} ms"
        for key, v in figures.items()
    ]


AFTER_S = 0.4
"""``--picture-keys`` also counts the CPU this long after the key: less than the quiet spell
(0.5 s) after which hidden pages catch up, as a user's next key comes."""


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (``/proc``, in ticks of
    1/CLK_TCK s: read as a sum over several keys)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def walk_keys(viewer: PtyViewer, keys: list[str]) -> list[str]:
    """Press ``keys`` in turn (each after QUIET_S of silence); per key, ms to the first byte
    written and to the screen settled, and the viewer's CPU per press (ms, mean)."""
    figures: dict[str, list[tuple[float | None, float | None, float]]] = {}
    for key in keys:
        cpu = cpu_s(viewer.pid)
        t0 = press(viewer, key)
        settled = settle(viewer, t0)
        with viewer._lock:
            first = next((t for t, _ in viewer.chunks if t >= t0), None)
        figures.setdefault(key, []).append((first and first - t0, settled, cpu_s(viewer.pid) - cpu))
    return [
        f"{key}: first byte {' · '.join(_ms(f) for f, _, _ in values)} ms, "
        f"settled {' · '.join(_ms(s) for _, s, _ in values)} ms, "
        f"viewer CPU {sum(c for _, _, c in values) * 1000 / len(values):.0f} ms a press"
        for key, values in figures.items()
    ]


def weights_terminal(run: str, wait: float) -> list[str]:
    """Weights' list keys in a real `tvis tui` on a pseudo-terminal: per key, ms to the first
    byte written (the cursor's line) and to the screen settled (the picture too)."""
    viewer = PtyViewer(run)
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        viewer.wait_for("parameters ·", press(viewer, "4"), timeout=600)
        time.sleep(wait)  # a DataTable keeps working after its rows are on screen
        return walk_keys(viewer, ["j"] * 6 + ["k"] * 2 + ["G", "g", "o", "o", "O"])
    finally:
        viewer.close()


def attention_terminal(run: str) -> list[str]:
    """Insights' Attention cursor in a real `tvis tui` on a run with a vision model (ViT):
    `a`, then j ×6, k ×3 (each row a new overlay of where its query looks), l and h; per key,
    ms to the first byte written and to the screen settled (the overlay too)."""
    viewer = PtyViewer(run)
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        insights = tab_titles(viewer).index("Insights") + 1
        viewer.wait_settled(press(viewer, str(insights)), timeout=120)
        viewer.wait_for("looks", press(viewer, "a"), timeout=120)
        return walk_keys(viewer, ["j"] * 6 + ["k"] * 3 + ["l", "h"])
    finally:
        viewer.close()


def switch_walk(run: str, n: int) -> list[str]:
    """Explore, then `.` ``n`` times (batches not seen yet) and `,` ``n`` times back, 1 s
    apart (the prefetch of the batches beside runs in that pause), each to a settled screen."""
    viewer = PtyViewer(run)
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        settle(viewer, press(viewer, "2"))
        time.sleep(1.5)
        lines = []
        for key in (".", ","):
            taken = []
            for _ in range(n):
                taken.append(settle(viewer, press(viewer, key)))
                time.sleep(1.0)
            shown = " · ".join(_ms(t) for t in taken)
            median = statistics.median([t or 0.0 for t in taken]) * 1000
            lines.append(f"Explore {key} ×{n}: {shown} ms (median {median:.0f})")
        return lines
    finally:
        viewer.close()


GAPS_S = (0.2, 0.6, 1.0, 0.4, 0.8)
"""``--gaps``: the pauses between keys, in turn: shorter and longer than the quiet spell
(``build_ahead.QUIET_S``, 0.5 s) after which pages are built ahead and the help drawn."""

GAP_KEYS = ("j", "k")
"""``--gaps``: keys of the Loss page's list that ask the agent for nothing new."""


def gap_keys(run: str, page: int, n: int) -> list[tuple[float, float | None, float]]:
    """In a fresh `tvis tui`, as soon as its first page has settled (every other page still
    to be built ahead): page ``page``, then ``n`` keys (``GAP_KEYS`` in turn), each pressed
    a gap of ``GAPS_S`` (in turn) after the previous one's screen settled, so that some land
    in quiet-spell work. Per key: its gap, the wall time to a settled screen and the
    viewer's main thread's CPU time meanwhile."""
    viewer = PtyViewer(run)
    taken = []
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        settle(viewer, viewer.press(str(page)), VISIT_SETTLED_S)
        for i in range(n):
            gap = GAPS_S[i % len(GAPS_S)]
            time.sleep(gap)
            ran0, _ = main_thread_s(viewer.pid)
            took = settle(viewer, viewer.press(GAP_KEYS[i % len(GAP_KEYS)]))
            taken.append((gap, took, main_thread_s(viewer.pid)[0] - ran0))
        return taken
    finally:
        viewer.close()


def switch_after_visits(run: str, visits: list[int], page: int, n: int) -> list[tuple]:
    """``visits`` (each settled and read 1 s), then ``page``, then `.` and `,` in turn ``n``
    times each: (key, seconds to a settled screen, CPU seconds of the viewer meanwhile)."""
    viewer = PtyViewer(run)
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        for visit in [*visits, page]:
            settle(viewer, press(viewer, str(visit)), VISIT_SETTLED_S)
            time.sleep(1.0)
        taken = []
        for key in [".", ","] * n:
            time.sleep(1.0)  # the page's own rest (a prefetch of the batches beside) first
            cpu0 = cpu_s(viewer.pid)
            t0 = press(viewer, key)
            took = settle(viewer, t0)
            taken.append((key, took, cpu_s(viewer.pid) - cpu0))
        return taken
    finally:
        viewer.close()


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:.0f}"


def table(
    figures: dict[tuple[str, str], list], cpu: dict[tuple[str, str], list] | None = None
) -> list[str]:
    def median(values: list) -> float | None:
        drawn = [v for v in values if v is not None]
        return statistics.median(drawn) if drawn else None

    rows = sorted(figures.items(), key=lambda kv: -(median(kv[1]) or -1.0))
    cpu = cpu or {}
    lines = [
        f"{'page':<9} {'key':<26} {'median':>7} {'max':>7}  n    {'cpu':>5}"
        "   (ms to a settled screen; cpu: the viewer's, median)"
    ]
    for (page, label), values in rows:
        drawn = [v for v in values if v is not None]
        top = max(drawn) if drawn else None
        over = " *" if (median(values) or 0) > 0.05 else ""
        spent = cpu.get((page, label))
        lines.append(
            f"{page:<9} {label:<26} {_ms(median(values)):>7} {_ms(top):>7} "
            f"{len(drawn)}/{len(values)} {_ms(median(spent) if spent else None):>5}{over}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", help="a recorded run (or a folder holding one)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pages", help="page numbers to visit, e.g. 2,3 (default: all)")
    parser.add_argument(
        "--first-visits", type=float, metavar="S", help="each page's first visit, S s after"
    )
    parser.add_argument("--cold-layers", type=int, metavar="N", default=0, help="N cold `y`")
    parser.add_argument("--after-settle", action="store_true", help="cold `y` once Explore settled")
    parser.add_argument("--weights-all", action="store_true", help="Weights' `a`, in process")
    parser.add_argument("--weights-list", action="store_true", help="Weights' list, in process")
    parser.add_argument(
        "--weights-terminal", type=float, metavar="WAIT", help="Weights' list keys in a pty"
    )
    parser.add_argument(
        "--picture-keys",
        choices=("weights", "insights", "embeddings"),
        help="Weights' list or Attention's cursor, in process, key to picture",
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, metavar="MS", help="--picture-keys: link delay"
    )
    parser.add_argument(
        "--attention-terminal", action="store_true", help="Attention's cursor keys in a pty"
    )
    parser.add_argument(
        "--switch-walk", type=int, metavar="N", help="Explore `.` N times, then `,` N times"
    )
    parser.add_argument(
        "--switch-after-visits", metavar="PAGES", help="visit PAGES (or 0), then `.` on --pages"
    )
    parser.add_argument(
        "--gaps",
        type=int,
        metavar="N",
        default=0,
        help="N keys on --pages (default 3) at varied gaps after the first page settled",
    )
    parser.add_argument(
        "--viewer-keys",
        type=float,
        metavar="READY_S",
        help="the viewer-only keys, READY_S after the first page, --repeat fresh viewers",
    )
    parser.add_argument(
        "--first-keys",
        metavar="PAGE:KEY,…",
        help="each KEY pressed once on PAGE after a rest, in --repeat fresh viewers",
    )
    args = parser.parse_args()
    print(interpreter_line())
    load = os.getloadavg()[0]
    if args.first_keys:
        for spec in args.first_keys.split(","):
            page, key = spec.split(":", 1)
            taken = [first_key(args.run, page, key) for _ in range(args.repeat)]
            walls, cpus = [w for w, _ in taken], [c for _, c in taken]
            print(
                f"page {page} first {key:<6} wall {' · '.join(_ms(w) for w in walls)} ms "
                f"(median {_ms(statistics.median(w or 0.0 for w in walls))}), main-thread "
                f"CPU {' · '.join(_ms(c) for c in cpus)} ms (median {_ms(statistics.median(cpus))})"
            )
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.viewer_keys is not None:
        rounds = [viewer_keys(args.run, args.viewer_keys) for _ in range(args.repeat)]
        print(f"{'page':<9} {'key':<10} {'wall ms, each round':<28} {'main-thread CPU ms':<24}")
        for page, key in rounds[0]:
            walls = [r[(page, key)][0] for r in rounds]
            cpus = [r[(page, key)][1] for r in rounds]
            print(
                f"{page:<9} {key:<10} {' · '.join(_ms(w) for w in walls):<28} "
                f"{' · '.join(_ms(c) for c in cpus):<24} "
                f"median {_ms(statistics.median(w or 0.0 for w in walls))} / "
                f"{_ms(statistics.median(cpus))}"
            )
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.gaps:
        for page in [int(p) for p in (args.pages or "3").split(",")]:
            taken = [k for _ in range(args.repeat) for k in gap_keys(args.run, page, args.gaps)]
            for gap in sorted(set(GAPS_S)):
                walls = [w or 0.0 for g, w, _ in taken if g == gap]
                cpus = [c for g, _, c in taken if g == gap]
                print(
                    f"page {page} gap {gap:.1f} s: ×{len(walls)} wall median "
                    f"{statistics.median(walls) * 1000:.0f} max {max(walls) * 1000:.0f} ms, "
                    f"main-thread CPU median {statistics.median(cpus) * 1000:.0f} "
                    f"max {max(cpus) * 1000:.0f} ms"
                )
            walls = [w or 0.0 for _, w, _ in taken]
            print(f"page {page} all: over 50 ms {sum(w > 0.05 for w in walls)} of {len(walls)}")
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.switch_after_visits:
        visits = [int(p) for p in args.switch_after_visits.split(",") if p != "0"]
        for page in [int(p) for p in (args.pages or "3").split(",")]:
            taken = switch_after_visits(args.run, visits, page, args.repeat)
            walls = [t or 0.0 for _, t, _ in taken]
            cpus = [c for _, _, c in taken]
            print(
                f"page {page} after visiting {visits or 'none'}: `.`/`,` ×{len(taken)} "
                f"wall median {statistics.median(walls) * 1000:.0f} ms "
                f"({' · '.join(_ms(w) for w in walls)}), "
                f"viewer CPU median {statistics.median(cpus) * 1000:.0f} ms "
                f"({' · '.join(f'{c * 1000:.0f}' for c in cpus)})"
            )
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.switch_walk:
        print("\n".join(switch_walk(args.run, args.switch_walk)))
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.picture_keys:
        print("\n".join(picture_keys(args.run, args.picture_keys, args.repeat, args.latency)))
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.attention_terminal:
        print("\n".join(attention_terminal(args.run)))
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.weights_terminal is not None:
        print("\n".join(weights_terminal(args.run, args.weights_terminal)))
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.weights_list:
        print(weights_list(args.run, timeout=600))
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.weights_all:
        print(weights_all(args.run, timeout=600))
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    if args.cold_layers:
        rounds = [cold_layers(args.run, args.after_settle) for _ in range(args.cold_layers)]
        rows, settled, ran, waited, from_page = zip(*rounds, strict=True)
        for what, values in (
            ("rows on screen", rows),
            ("rows on screen, from `2`", from_page),
            ("screen settled", settled),
            ("viewer's main thread on a CPU, y to the rows", ran),
            ("viewer's main thread waiting for a CPU, y to the rows", waited),
        ):
            ms = sorted(v * 1000 for v in values)
            print(
                f"cold y, {what}: median {statistics.median(ms):.0f} ms "
                f"(min {ms[0]:.0f}, max {ms[-1]:.0f}, n={len(ms)}; "
                f"{' · '.join(f'{v * 1000:.0f}' for v in values)})"
            )
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    pages = [int(p) for p in args.pages.split(",")] if args.pages else None
    if args.first_visits is not None:
        cpus: list[dict[str, float]] = [{} for _ in range(args.repeat)]
        visits = [first_visits(args.run, pages, args.first_visits, c) for c in cpus]
        for page in visits[0]:
            ms = [round((v[page] or 0) * 1000) for v in visits]
            cpu_ms = [round(c[page] * 1000) for c in cpus]
            print(
                f"first visit {page:<12} {statistics.median(ms):>5.0f} ms  ({' · '.join(map(str, ms))})"
                f"  main-thread CPU {statistics.median(cpu_ms):>4.0f} ms "
                f"({' · '.join(map(str, cpu_ms))})"
            )
        print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
        return 0
    cpu: dict[tuple[str, str], list] = {}
    figures = sweep(args.run, args.repeat, pages, cpu)
    print("\n".join(table(figures, cpu)))
    over = sum(1 for v in figures.values() if (statistics.median([x or 0 for x in v]) or 0) > 0.05)
    print(f"{over} of {len(figures)} keys over 50 ms (*)")
    print(
        f"CPU over the sweep: viewer {TOTAL_CPU.get('viewer', 0.0):.2f} s, "
        f"agent {TOTAL_CPU.get('agent', 0.0):.2f} s"
    )
    print(f"load average {load:.1f} → {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
