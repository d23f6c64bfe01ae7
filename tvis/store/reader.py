"""Reads a run directory lazily: nothing beyond meta and the run index until asked.

Every problem with the files on disk becomes a ``StoreError`` with a sentence a user can
act on; the reader never unpickles or evaluates anything.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import socket
from functools import cached_property
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from tvis.store import schema, validate
from tvis.store.format import (
    BATCHES,
    BLOB,
    FORMAT_VERSION,
    INCOMPLETE,
    INDEX,
    META,
    RUN_INDEX,
    RUNNING,
    SOURCES,
    STEPS,
    TMP_SUFFIX,
    folder_name,
)


class StoreError(Exception):
    """A run directory that cannot be read as asked; the message says why."""


def is_run(path: Path) -> bool:
    return (Path(path) / META).is_file()


def find_runs(root: Path) -> list[Path]:
    """Run folders at ``root`` or one or two levels below it (``<project>/tvis_runs/<run>``)."""
    root = Path(root)
    if is_run(root):
        return [root]
    found: list[Path] = []
    for depth_glob in ("*", "*/*"):
        found += [p for p in root.glob(depth_glob) if p.is_dir() and is_run(p)]
        if found:
            break
    return sorted(found, key=lambda p: p.name, reverse=True)


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
        _check(self.meta, schema.RunMeta, f"{self.path / META}")
        version = self.meta.get("format", 0)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise StoreError(
                f"run {self.path.name} uses format {version}, newer than this tvis reads "
                f"({FORMAT_VERSION}); upgrade tvis on this machine."
            )

    @property
    def run_id(self) -> str:
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
        if not isinstance(index, dict):
            raise StoreError(f"the run index of {self.path.name} is not a map; re-record the run.")
        _check(index, schema.RunIndex, f"the run index of {self.path.name}")
        return index

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
            if _is_temp(os.path.basename(dirpath)):
                continue
            for name in files:
                try:
                    total += os.stat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
        return total


def _check(record: dict[str, Any], kind: type, what: str) -> None:
    """Types are checked once, here, so no reader past this point meets a surprise."""
    found = validate.problem(record, kind, what)
    if found is not None:
        raise StoreError(found)


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(TMP_SUFFIX)


def remove_stale_temps(run: RunReader) -> int:
    """Remove the temp files and folders a killed recorder left behind (they hold no
    finished batch and only take disk space); nothing while the recorder still runs.
    Returns how many were removed."""
    if run.meta.get("status") == RUNNING and _recorder_alive(run.meta):
        return 0
    removed = 0
    for folder in (run.path, run.path / BATCHES, run.path / STEPS):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in filter(_is_temp, names):
            path = folder / name
            try:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
                removed += 1
            except OSError:
                pass  # a read-only copy of a run: the reader ignores them anyway
    return removed


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
        kind = schema.StepRecord if self.path.parent.name == STEPS else schema.BatchRecord
        _check(record, kind, f"the index of {self.what} ({self.path})")
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
