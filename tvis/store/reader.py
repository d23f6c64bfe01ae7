"""Reads a run directory lazily: nothing beyond meta and the run index until asked.

Every problem with the files on disk becomes a ``StoreError`` with a sentence a user can
act on; the reader never unpickles or evaluates anything.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from tvis.store import codec
from tvis.store.format import (
    BATCHES,
    BLOB,
    FORMAT_VERSION,
    GROUP,
    INCOMPLETE,
    INDEX,
    META,
    RUN_INDEX,
    RUNNING,
    SOURCES,
    STEPS,
    folder_name,
)

# Decoding a weight follows XOR deltas back through earlier steps; the recorder stores a
# full copy every few steps (tvis/record/params.py KEYFRAME), so a longer chain is corrupt.
MAX_CHAIN = 64


class StoreError(Exception):
    """A run directory that cannot be read as asked; the message says why."""


def is_run(path: Path) -> bool:
    return (Path(path) / META).is_file()


def is_group(path: Path) -> bool:
    """Whether ``path`` is a recording of several ranks (one run folder per rank)."""
    return (Path(path) / GROUP).is_file()


def rank_runs(group: Path) -> list[Path]:
    """The rank run folders of a group, rank 0 first."""
    ranks = []
    for p in Path(group).glob("rank*"):
        number = p.name.removeprefix("rank")
        if number.isdigit() and is_run(p):
            ranks.append((int(number), p))
    return [p for _, p in sorted(ranks)]


def describe_group(group: Path) -> dict[str, Any]:
    """A group's ``group.json`` (``{}`` if unreadable: its rank folders still list)."""
    try:
        data = json.loads((Path(group) / GROUP).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# How deep under a folder runs are looked for: ``examples/<project>/tvis_runs/<run>`` is
# three levels down. Folders that never hold runs are skipped, and the search gives up
# after MAX_FOLDERS folders so `tvis ls ~` stays quick.
SEARCH_DEPTH = 4
MAX_FOLDERS = 20_000
_NEVER_RUNS = {"node_modules", "__pycache__", "site-packages", "venv", "batches", "steps"}


def find_runs(root: Path) -> list[Path]:
    """Run folders at ``root`` or up to SEARCH_DEPTH levels below it, newest first
    (``<project>/tvis_runs/<run>``, ``examples/<project>/tvis_runs/<run>``); the ranks
    of a group are listed together, rank 0 first."""
    root = Path(root)
    if is_run(root):
        return [root]
    if is_group(root):
        return rank_runs(root)
    found: list[tuple[str, int, Path]] = []
    level, seen = [root], 0
    for _ in range(SEARCH_DEPTH):
        below: list[Path] = []
        for folder in level:
            for path in _subfolders(folder):
                seen += 1
                if is_run(path):
                    found.append((path.name, 0, path))
                elif is_group(path):
                    found += [(path.name, -i, r) for i, r in enumerate(rank_runs(path))]
                else:
                    below.append(path)
            if seen > MAX_FOLDERS:
                break
        level = below
    return [p for *_, p in sorted(found, key=lambda f: f[:2], reverse=True)]


def _subfolders(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return [
                Path(e.path)
                for e in entries
                if not e.name.startswith(".") and e.name not in _NEVER_RUNS and e.is_dir()
            ]
    except OSError:
        return []


def _load(path: Path, what: str) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise StoreError(f"{what} is missing ({path}); the run may still be starting.") from None
    except OSError as e:
        raise StoreError(f"cannot read {what} ({path}): {e.strerror}.") from None
    try:
        if path.suffix == ".json":
            return json.loads(data)
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception:
        raise StoreError(f"{what} is corrupt ({path}); re-record the run.") from None


class RunReader:
    """One run folder."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.meta: dict[str, Any] = _load(self.path / META, "the run's meta.json")
        if not isinstance(self.meta, dict):
            raise StoreError(f"{self.path / META} is not a tvis run description.")
        version = self.meta.get("format", 0)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise StoreError(
                f"run {self.path.name} uses format {version}, newer than this tvis reads "
                f"({FORMAT_VERSION}); upgrade tvis on this machine."
            )

    @property
    def run_id(self) -> str:
        """The folder's name; a rank's run is named with its group (``<group>/rank1``)."""
        if is_group(self.path.parent):
            return f"{self.path.parent.name}/{self.path.name}"
        return self.path.name

    @property
    def status(self) -> str:
        """The recorded status, or ``incomplete`` when a 'running' recorder is gone."""
        status = self.meta.get("status", INCOMPLETE)
        if status == RUNNING and not _recorder_alive(self.meta):
            return INCOMPLETE
        return status

    def index(self) -> dict[str, Any]:
        """The run index (batches, steps, params, notices, data); empty before batch 0."""
        if not (self.path / RUN_INDEX).exists():
            return {}
        index = _load(self.path / RUN_INDEX, "the run index")
        return index if isinstance(index, dict) else {}

    def batch_ids(self) -> list[int]:
        return _chunk_ids(self.path / BATCHES)

    def step_ids(self) -> list[int]:
        return _chunk_ids(self.path / STEPS)

    def batch(self, index: int) -> Chunk:
        return Chunk(self.path / BATCHES / folder_name(index), f"batch {index}")

    def step(self, index: int) -> Chunk:
        return Chunk(self.path / STEPS / folder_name(index), f"step {index}", self.step)

    def sources(self) -> dict[str, str]:
        if not (self.path / SOURCES).exists():
            return {}
        return _load(self.path / SOURCES, "the source snapshot")

    def size_bytes(self) -> int:
        total = 0
        for dirpath, _, files in os.walk(self.path):
            for name in files:
                try:
                    total += os.stat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
        return total


def _chunk_ids(folder: Path) -> list[int]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


def _recorder_alive(meta: dict[str, Any]) -> bool:
    if meta.get("host") != socket.gethostname():
        return True  # cannot tell from here; trust the file
    pid = meta.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Chunk:
    """One batch or step folder: its index record and its tensor values.

    ``open_step`` opens another step of the same run: a step's weights are stored as XOR
    deltas against an earlier step's (format.py), decoded here on demand."""

    def __init__(
        self, path: Path, what: str, open_step: Callable[[int], Chunk] | None = None
    ) -> None:
        self.path = path
        self.what = what
        self.open_step = open_step
        self._decoded: dict[int, np.ndarray] = {}

    @cached_property
    def record(self) -> dict[str, Any]:
        record = _load(self.path / INDEX, f"the index of {self.what}")
        if not isinstance(record, dict):
            raise StoreError(f"the index of {self.what} is corrupt ({self.path}).")
        return record

    @cached_property
    def tensors(self) -> dict[int, dict[str, Any]]:
        return {t["id"]: t for t in self.record.get("tensors", [])}

    def tensor(self, tensor_id: int) -> dict[str, Any]:
        try:
            return self.tensors[tensor_id]
        except (KeyError, TypeError):
            raise StoreError(f"{self.what} has no tensor {tensor_id!r}.") from None

    def array(self, tensor_id: int) -> np.ndarray | None:
        """The stored values of a tensor (read-only, memory-mapped), or None if not kept."""
        value = self.tensor(tensor_id).get("value")
        if not value:
            return None
        if value.get("codec"):
            return self._encoded_array(tensor_id, value)
        try:
            dtype = np.dtype(value["dtype"])
            shape = tuple(int(s) for s in value["shape"])
            offset, nbytes = int(value["offset"]), int(value["nbytes"])
        except (KeyError, TypeError, ValueError):
            raise StoreError(f"tensor {tensor_id} of {self.what} has a corrupt entry.") from None
        if dtype.hasobject or nbytes != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            raise StoreError(f"tensor {tensor_id} of {self.what} has a corrupt entry.")
        if nbytes == 0:
            return np.zeros(shape, dtype)
        buf = self._blob
        if offset < 0 or offset + nbytes > len(buf):
            raise StoreError(f"the values of {self.what} are truncated ({self.path / BLOB}).")
        return np.frombuffer(
            buf, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset
        ).reshape(shape)

    def _encoded_array(self, tensor_id: int, value: dict[str, Any]) -> np.ndarray:
        """An encoded value: the decoded array, or for a Δw entry after - before."""
        decoded = self._decode(tensor_id)
        before_id = value.get("delta")
        if before_id is None:
            return decoded
        return np.subtract(decoded, self._decode(before_id))

    def _decode(self, tensor_id: int, depth: int = 0) -> np.ndarray:
        """The stored bits of an encoded entry, XOR-ed back with their base: a weight's
        values, a gradient's, or the weight after the step for a Δw entry."""
        cached = self._decoded.get(tensor_id)
        if cached is not None:
            return cached
        value = self.tensor(tensor_id).get("value") or {}
        try:
            dtype = np.dtype(value["dtype"])
            shape = tuple(int(s) for s in value["shape"])
            offset, nbytes = int(value["offset"]), int(value["nbytes"])
        except (KeyError, TypeError, ValueError):
            raise StoreError(f"tensor {tensor_id} of {self.what} has a corrupt entry.") from None
        if value.get("codec") != codec.CODEC or dtype.hasobject:
            raise StoreError(
                f"tensor {tensor_id} of {self.what} uses an encoding this tvis cannot read "
                f"({value.get('codec')!r}); upgrade tvis on this machine."
            )
        if value.get("delta") is not None:
            base = self._decode(int(value["delta"]), depth + 1)
        elif value.get("base") is not None:
            base = self._after_at(value["base"], depth + 1)
        else:
            base = None
        buf = self._blob
        if offset < 0 or offset + nbytes > len(buf):
            raise StoreError(f"the values of {self.what} are truncated ({self.path / BLOB}).")
        try:
            array = codec.decode(
                memoryview(buf)[offset : offset + nbytes], dtype, shape, base, value.get("crc32")
            )
        except ValueError as e:
            raise StoreError(
                f"tensor {tensor_id} of {self.what}: {e}; re-record the run."
            ) from None
        self._decoded[tensor_id] = array
        return array

    def _after_at(self, base: Any, depth: int) -> np.ndarray:
        """A parameter's weight after an earlier step: the base of a weight delta."""
        if depth > MAX_CHAIN or self.open_step is None or not isinstance(base, dict):
            raise StoreError(f"{self.what} refers to an earlier step it cannot reach.")
        earlier = self.open_step(int(base.get("step", -1)))
        name = base.get("param")
        param = next((p for p in earlier.record.get("params") or [] if p.get("name") == name), None)
        if param is None or not isinstance(param.get("update"), int):
            raise StoreError(
                f"{self.what} refers to parameter {name!r}, missing in {earlier.what}."
            )
        return earlier._decode(param["update"], depth)

    @cached_property
    def _blob(self) -> mmap.mmap | bytes:
        try:
            with open(self.path / BLOB, "rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    return b""
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise StoreError(f"cannot read the values of {self.what}: {e.strerror}.") from None
