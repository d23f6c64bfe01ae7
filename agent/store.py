"""The runs under one root folder, opened through small caches and never outside the root.

Every path a client names is checked twice: lexically (relative, no ``..``) and after
resolving symlinks (the real path must stay under the real root). Files are re-read when
they change on disk, so a run that is still being recorded shows its new batches.
"""

from __future__ import annotations

import gc
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError
from tvis.store.format import BATCHES, BLOB, INDEX, META, RUN_INDEX, SOURCES, STEPS, folder_name
from tvis.store.lru import LRU
from tvis.store.reader import Chunk, RunReader, StoreError, find_runs, inside, is_run

T = TypeVar("T")

# Parsed batch indexes of a big model run to tens of MB each; a handful covers what one
# viewer looks at (a batch, its step, the neighbours it prefetches) without growing.
CHUNK_CACHE = 12
# Batches of this many calls are frozen out of the cyclic collector once read (_read_now).
FREEZE_CALLS = 5_000
# Run-level records (meta, run index, sources) are small; one per run a viewer has open.
RUN_CACHE = 32


def _freeze_if_big(chunk: Chunk) -> None:
    """After a big batch's record or a value derived from it is built, move every live
    object out of the cyclic collector's reach (``gc.freeze``).

    A batch of 20,000 calls is a few hundred thousand objects (its record, call tree and
    rows) that live as long as the chunk stays cached; each full collection rescanned
    them, pausing the agent (and a viewer holding it in-process, ``LocalClient``) for
    0.3-0.7 s at random keypresses. They hold no cycles, so reference counting still frees
    them when the chunk leaves the cache. The price: cycles alive at a freeze that die
    later are never collected (about 700 objects per big batch opened), so small batches,
    whose collections cost milliseconds, are not frozen."""
    if len(chunk.record.get("calls") or ()) >= FREEZE_CALLS:
        gc.freeze()


_paused = 0  # threads inside collector_paused
_paused_lock = threading.Lock()
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off while a batch's record is decoded or rows are built from it.

    Decoding 20,000 calls makes a few hundred thousand dicts and lists that all survive;
    each allocation threshold crossed started a collection that scanned them again: the
    calls of the 20,000-layer run of bench/layers_bench.py decoded in 387 ms with the
    collector on, 103 ms with it off. They hold no cycles, so nothing is lost by collecting
    later. Threads nest: the collector is switched back on (if it was on) when the last
    one leaves."""
    global _paused, _was_enabled
    with _paused_lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()


def _read_now(chunk: Chunk) -> Chunk:
    with collector_paused():
        _freeze_if_big(chunk)  # reads the record
    return chunk


class _Once:
    """A value being derived by one thread that others wait for instead of deriving it too."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def run(self, build: Callable[[], T]) -> bool:
        """Compute the value; whether that worked."""
        try:
            self._value = build()
        except BaseException as e:
            self._error = e
        finally:
            self._done.set()
        return self._error is None

    def result(self) -> Any:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


def _stat_key(path: Path) -> tuple[int, int, int]:
    # Writers replace files by rename, so inode + mtime + size tells a new version apart.
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise StoreError(
            f"{path.name} is gone from {path.parent}; the run may have been deleted."
        ) from None
    return st.st_ino, st.st_mtime_ns, st.st_size


class RunStore:
    """Safe, cached access to the runs under ``root``."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(os.path.realpath(root))
        self._runs = LRU(RUN_CACHE)
        self._chunks = LRU(CHUNK_CACHE)
        self._reading: dict[tuple[Path, tuple[int, int, int]], _Once] = {}  # chunks being read
        self._reading_lock = threading.Lock()
        self._derived: weakref.WeakKeyDictionary[Chunk, dict[str, Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._derived_lock = threading.Lock()

    def inside(self, path: Path | str) -> bool:
        """Whether ``path``, symlinks resolved, lies under the root."""
        return inside(self.root, path)

    def run_paths(self) -> list[Path]:
        """Run folders under the root, newest first (links leading outside are left out)."""
        return [p for p in find_runs(self.root) if self.inside(p)]

    def name_of(self, path: Path) -> str:
        """The name a client uses for the run at ``path``: its path relative to the root."""
        return PurePosixPath(Path(os.path.relpath(path, self.root))).as_posix()

    def run_path(self, run: str) -> Path:
        """The real folder of run ``run``; refuses names that lead outside the root."""
        parts = PurePosixPath(run).parts
        if not run or "\0" in run or PurePosixPath(run).is_absolute() or ".." in parts:
            raise AgentError(
                f"run {run!r} must be a path relative to the agent's root, without '..'.",
                BAD_REQUEST,
            )
        path = self.root / run
        if not self.inside(path):
            raise AgentError(f"run {run!r} leads outside the agent's root.", BAD_REQUEST)
        real = Path(os.path.realpath(path))
        if not is_run(real):
            raise AgentError(f"there is no run {run!r} under {self.root}.", NOT_FOUND)
        return real

    def _checked(self, path: Path) -> Path:
        if path.exists() and not self.inside(path):
            raise AgentError(
                f"{path.name} of this run leads outside the agent's root.", BAD_REQUEST
            )
        return path

    def reader(self, run: str) -> RunReader:
        path = self.run_path(run)
        meta = self._checked(path / META)
        return self._runs.get((path, META, _stat_key(meta)), lambda: RunReader(path))

    def index(self, run: str) -> dict[str, Any]:
        """The run index (``{}`` before the first batch is written)."""
        reader = self.reader(run)
        path = self._checked(reader.path / RUN_INDEX)
        if not path.exists():
            return {}
        return self._runs.get((reader.path, RUN_INDEX, _stat_key(path)), reader.index)

    def sources(self, run: str) -> dict[str, str]:
        reader = self.reader(run)
        path = self._checked(reader.path / SOURCES)
        if not path.exists():
            return {}
        sources = self._runs.get((reader.path, SOURCES, _stat_key(path)), reader.sources)
        return sources if isinstance(sources, dict) else {}

    def chunk(self, run: str, kind: str, index: int) -> Chunk:
        """Batch (``kind="batch"``) or step ``index`` of ``run``, with its parsed index."""
        folder = BATCHES if kind == "batch" else STEPS
        if index < 0:
            raise AgentError(f"{kind} must be 0 or more, not {index}.", BAD_REQUEST)
        path = self.run_path(run) / folder / folder_name(index)
        if not path.is_dir():
            raise AgentError(f"run {run!r} has no {kind} {index} (yet).", NOT_FOUND)
        for part in (path, path / INDEX, path / BLOB):
            self._checked(part)
        real = Path(os.path.realpath(path))
        # A step's weights decode against earlier steps, opened through this same check.
        open_step = (lambda i: self.chunk(run, "step", i)) if kind == "step" else None
        return self._read_once(
            (real, _stat_key(real / INDEX)),
            lambda: _read_now(Chunk(real, f"{kind} {index}", open_step)),
        )

    def _read_once(
        self, key: tuple[Path, tuple[int, int, int]], read: Callable[[], Chunk]
    ) -> Chunk:
        """The chunk cached under ``key``, else ``read()`` by one thread while the others
        asking for it wait: a session's first requests (Replay's events, the tree's roots,
        the layers table) all open the first batch at once, and a 20,000-call batch took
        0.3 s of CPU for each of them."""
        found, chunk = self._chunks.peek(key)
        if found:
            return chunk
        with self._reading_lock:
            found, chunk = self._chunks.peek(key)  # read while this thread waited
            if found:
                return chunk
            once = self._reading.get(key)
            reader = once is None
            if once is None:
                once = self._reading[key] = _Once()
        if reader:
            try:
                if once.run(read):
                    self._chunks.put(key, once.result())
            finally:
                with self._reading_lock:
                    self._reading.pop(key, None)
        return once.result()

    def derived(self, chunk: Chunk, name: str, build: Callable[[], T]) -> T:
        """A value computed from ``chunk`` once, dropped with it when the cache lets it go.
        Threads asking for it while it is being computed wait for that computation."""
        with self._derived_lock:
            cached = self._derived.setdefault(chunk, {})
            found = cached.get(name)
            builder = found is None
            once = _Once() if found is None else found
            if builder:
                cached[name] = once
        if builder:
            with collector_paused():
                built = once.run(build)
            if built:
                _freeze_if_big(chunk)
            else:
                with self._derived_lock:
                    cached.pop(name, None)  # a failure is not kept: a later ask tries again
        return once.result()
