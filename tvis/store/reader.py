"""Reads a run directory lazily: nothing beyond meta and the run index until asked.

Every problem with the files on disk becomes a ``StoreError`` with a sentence a user can
act on; the reader never unpickles or evaluates anything.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
from functools import cached_property
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

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


def find_runs(root: Path) -> list[Path]:
    """Run folders at ``root`` or one or two levels below it (``<project>/tvis_runs/<run>``),
    newest first; the ranks of a group are listed together, rank 0 first."""
    root = Path(root)
    if is_run(root):
        return [root]
    if is_group(root):
        return rank_runs(root)
    found: list[tuple[str, int, Path]] = []
    for depth_glob in ("*", "*/*"):
        for p in root.glob(depth_glob):
            if not p.is_dir():
                continue
            if is_run(p):
                found.append((p.name, 0, p))
            elif is_group(p):
                found += [(p.name, -i, r) for i, r in enumerate(rank_runs(p))]
        if found:
            break
    return [p for *_, p in sorted(found, key=lambda f: f[:2], reverse=True)]


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
        return Chunk(self.path / STEPS / folder_name(index), f"step {index}")

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
    """One batch or step folder: its index record and its tensor values."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what

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

    @cached_property
    def _blob(self) -> mmap.mmap | bytes:
        try:
            with open(self.path / BLOB, "rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    return b""
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise StoreError(f"cannot read the values of {self.what}: {e.strerror}.") from None
