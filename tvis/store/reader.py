"""Reads a run directory lazily: nothing beyond meta and the run index until asked.

Every problem with the files on disk becomes a ``StoreError`` with a sentence a user can
act on; the reader never unpickles or evaluates anything.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import shutil
import socket
import stat
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO, cast, overload

import msgpack
import numpy as np

from tvis.store import chunks, codec, derived, predict, schema, validate
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
    TMP_SUFFIX,
    folder_name,
)

# Process ids are C ints; anything past a C long cannot even be asked about (os.kill).
MAX_PID = 1 << 63
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


def inside(root: Path | str, path: Path | str) -> bool:
    """Whether ``path``, symlinks resolved, lies under ``root`` (symlinks resolved too)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def leads_outside(root: Path | str, run: Path) -> str | None:
    """The sentence for a run under ``root`` one of whose files links outside it, which the
    agent never reads (so `tvis ls` and the agent list it alike, unreadable), or None."""
    for name in (META, RUN_INDEX, SOURCES):
        path = run / name
        if os.path.lexists(path) and not inside(root, path):
            return f"{name} of this run leads outside {root} through a symlink."
    return None


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


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file; OSError (ENXIO) otherwise.

    A FIFO or a device in a run folder would block a plain ``open`` or ``read`` forever,
    and with it an agent thread: opened without blocking and checked on the open file
    (no window between a check and the open), it is refused at once."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.ENXIO, "not a regular file", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read(path: Path, what: str) -> bytes:
    try:
        with open_regular(path) as f:
            return f.read()
    except FileNotFoundError:
        raise StoreError(f"{what} is missing ({path}); the run may still be starting.") from None
    except OSError as e:
        raise StoreError(f"cannot read {what} ({path}): {e.strerror}.") from None


def _load(path: Path, what: str) -> Any:
    return _parse(_read(path, what), path, what)


def _parse(data: bytes, path: Path, what: str) -> Any:
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
        pid = self.meta.get("pid")
        if isinstance(pid, int) and not -MAX_PID <= pid < MAX_PID:
            raise StoreError(
                f"{self.path / META} gives pid {pid}, which no process can have; re-record the run."
            )
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
        return Chunk(self.path / STEPS / folder_name(index), f"step {index}", self.step)

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
    # 0 and negative pids name process groups, and a pid past a C long no process at all.
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def _index_record(data: bytes, what: str) -> dict[str, Any] | None:
    """An index record with everything but its tensor entries decoded, or None when the
    bytes are not a map whose ``tensors`` is a list (the caller then decodes them whole).

    The entries are most of a batch's index (60,000 of them, 18 MB, for 20,000 calls):
    skipping them costs a few milliseconds where decoding and checking took a second."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(data) + 1)
    unpacker.feed(data)
    record: dict[Any, Any] = {}
    try:
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key != "tensors":
                record[key] = unpacker.unpack()
                continue
            offsets = []
            for _ in range(unpacker.read_array_header()):
                offsets.append(unpacker.tell())
                unpacker.skip()
            offsets.append(unpacker.tell())
            record[key] = TensorEntries(memoryview(data), offsets, what)
    except Exception:
        return None
    return record if unpacker.tell() == len(data) else None


class _ReadOnFirstUse(Sequence[dict[str, Any]]):
    """Records of a file, each made ready (decoded, checked) the first time it is asked
    for: subclasses give ``_item(i)`` for one index (negative ones included)."""

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self._item(j) for j in range(*i.indices(len(self)))]
        return self._item(i)

    @abstractmethod
    def _item(self, i: int) -> dict[str, Any]: ...


class TensorEntries(_ReadOnFirstUse):
    """The tensor entries of an index record, in file order; each is decoded and checked
    against ``schema.TensorEntry`` the first time it is asked for."""

    def __init__(
        self,
        data: memoryview,
        offsets: list[int],
        what: str,
        entries: list[dict[str, Any]] | None = None,
    ) -> None:
        self._data, self._offsets, self._what = data, offsets, what
        self._entries: list[dict[str, Any] | None] = (
            list(entries) if entries is not None else [None] * (len(offsets) - 1)
        )
        self.by_id = TensorsById(self)

    @classmethod
    def decoded(cls, entries: list[dict[str, Any]]) -> TensorEntries:
        """Entries already decoded and checked (a record read whole)."""
        return cls(memoryview(b""), [], "", entries)

    def __len__(self) -> int:
        return len(self._entries)

    def _item(self, i: int) -> dict[str, Any]:
        entry = self._entries[i]
        if entry is None:
            i = range(len(self))[i]
            entry = self._entries[i] = self._decode(i)
        return entry

    def _decode(self, i: int) -> dict[str, Any]:
        start, end = self._offsets[i], self._offsets[i + 1]
        try:
            entry = msgpack.unpackb(self._data[start:end], raw=False, strict_map_key=False)
        except Exception:
            raise StoreError(
                f"{self._what} is corrupt at tensors[{i}]; re-record the run."
            ) from None
        found = validate.problem(entry, schema.TensorEntry, self._what, at=f".tensors[{i}]")
        if found is not None:
            raise StoreError(found)
        if not isinstance(entry.get("id"), int):
            raise StoreError(f"{self._what} is corrupt: tensors[{i}] has no id; re-record the run.")
        return entry


class CallRecords(_ReadOnFirstUse):
    """The calls of a batch record, in file order; each is checked against ``schema.Call``
    the first time it is asked for, so a corrupt call is named by whatever reads it and a
    call nothing reads costs nothing (checking 20,000 calls up front was ~0.2 s of opening
    a big batch, and one bad call made the whole batch unreadable).

    ``unchecked`` is the decoded list itself, for scans that guard every value they read
    (the call tree's ids and parents, counting the forward calls)."""

    def __init__(self, calls: list[Any], what: str, checked: bool = False) -> None:
        self.unchecked = calls
        self._what = what
        self._ok: bytearray | None = None if checked else bytearray(len(calls))

    def __len__(self) -> int:
        return len(self.unchecked)

    def _item(self, i: int) -> dict[str, Any]:
        call = self.unchecked[i]
        if self._ok is not None and not self._ok[i]:
            i = range(len(self))[i]
            found = validate.problem(call, schema.Call, self._what, at=f".calls[{i}]")
            if found is not None:
                raise StoreError(found)
            self._ok[i] = 1
        return call


class TensorsById(Mapping):
    """Tensor entries by id. The recorder numbers them in file order, so entry ``i`` is
    tried first; any other numbering falls back to decoding them all once."""

    def __init__(self, entries: TensorEntries) -> None:
        self._entries = entries
        self._all: dict[int, dict[str, Any]] | None = None

    def __getitem__(self, tensor_id: Any) -> dict[str, Any]:
        if type(tensor_id) is not int:
            raise KeyError(tensor_id)
        if self._all is None and 0 <= tensor_id < len(self._entries):
            entry = self._entries[tensor_id]
            if entry.get("id") == tensor_id:
                return entry
        if self._all is None:
            self._all = {e["id"]: e for e in self._entries if isinstance(e.get("id"), int)}
        return self._all[tensor_id]

    def __iter__(self) -> Iterator[int]:
        return (e["id"] for e in self._entries if isinstance(e.get("id"), int))

    def __len__(self) -> int:
        return len(self._entries)


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
        self._chunked: dict[int, chunks.ChunkedArray] = {}

    @cached_property
    def record(self) -> dict[str, Any]:
        """The index record; its ``tensors`` are a ``TensorEntries``, decoded as asked for."""
        what = f"the index of {self.what} ({self.path})"
        data = _read(self.path / INDEX, what)
        kind = schema.StepRecord if self.path.parent.name == STEPS else schema.BatchRecord
        record = _index_record(data, what)
        if record is None:  # not the usual layout: decoded whole, to say what is wrong
            record = _parse(data, self.path / INDEX, f"the index of {self.what}")
            if not isinstance(record, dict):
                raise StoreError(f"the index of {self.what} is corrupt ({self.path}).")
            _check(record, kind, what)
            record["tensors"] = TensorEntries.decoded(record.get("tensors", []))
            if isinstance(record.get("calls"), list):
                record["calls"] = CallRecords(record["calls"], what, checked=True)
            return record
        entries = record.pop("tensors", None) or TensorEntries.decoded([])
        calls = record.get("calls")
        if isinstance(calls, list):
            record["calls"] = []  # checked one by one as they are read (CallRecords)
        _check(record, kind, what)  # and the entries one by one as they are decoded
        record["tensors"] = entries
        if isinstance(calls, list):
            record["calls"] = CallRecords(calls, what)
        return record

    @property
    def tensors(self) -> TensorsById:
        return self.record["tensors"].by_id

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
        if "derive" in value:  # rebuilt lazily, like a ChunkedArray below
            return cast(np.ndarray, self._derived_array(tensor_id, value))
        if value.get("codec") == chunks.CODEC:
            # A ChunkedArray stands in for the array: indexing it decodes only the chunks
            # touched, and anything else reads it whole through __array__.
            return cast(np.ndarray, self._chunked_array(tensor_id, value))
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

    def _chunked_array(self, tensor_id: int, value: dict[str, Any]) -> chunks.ChunkedArray:
        """An activation or gradient compressed in chunks: decoded as it is indexed. Made
        once per tensor (its chunk table is thousands of entries for a big activation)."""
        cached = self._chunked.get(tensor_id)
        if cached is not None:
            return cached
        try:
            dtype = np.dtype(value["dtype"])
            shape = tuple(int(s) for s in value["shape"])
            offset, nbytes = int(value["offset"]), int(value["nbytes"])
            chunk, sizes = int(value["chunk"]), np.asarray(value["sizes"], dtype=np.int64)
        except (KeyError, TypeError, ValueError, OverflowError):
            raise StoreError(f"tensor {tensor_id} of {self.what} has a corrupt entry.") from None
        count = int(np.prod(shape, dtype=np.int64))
        if (
            dtype.hasobject
            or chunk < 1
            or sizes.shape != (-(-count // chunk),)
            or (sizes < 0).any()
            or int(sizes.sum()) != nbytes
        ):
            raise StoreError(f"tensor {tensor_id} of {self.what} has a corrupt entry.")
        buf = self._blob
        if offset < 0 or offset + nbytes > len(buf):
            raise StoreError(f"the values of {self.what} are truncated ({self.path / BLOB}).")

        def corrupt(why: str) -> StoreError:
            return StoreError(
                f"the values of tensor {tensor_id} of {self.what} are corrupt "
                f"({why}); re-record the run."
            )

        array = chunks.ChunkedArray(buf, offset, sizes, chunk, dtype, shape, corrupt)
        self._chunked[tensor_id] = array
        return array

    def _derived_array(self, tensor_id: int, value: dict[str, Any]) -> derived.DerivedArray:
        """A value rebuilt from the stored values of earlier entries (derived.py)."""
        recipe = value["derive"]
        try:
            ids = derived.sources(recipe)
            dtype = np.dtype(value["dtype"])
            shape = tuple(int(s) for s in value["shape"])
        except (KeyError, TypeError, ValueError):
            raise StoreError(f"tensor {tensor_id} of {self.what} has a corrupt entry.") from None
        if not all(0 <= i < tensor_id for i in ids):  # earlier entries only: chains end
            raise StoreError(f"tensor {tensor_id} of {self.what} has a corrupt entry.")
        inputs = [x for x in map(self.array, ids) if x is not None]
        count = int(np.prod(shape, dtype=np.int64))
        if len(inputs) != len(ids) or any(x.dtype != dtype or x.size != count for x in inputs):
            raise StoreError(f"tensor {tensor_id} of {self.what} has a corrupt entry.")
        return derived.DerivedArray(recipe["op"], list(inputs), shape)

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
        if depth > MAX_CHAIN:  # a corrupt record whose bases go round in a circle
            raise StoreError(f"{self.what} refers to values it cannot reach.")
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
        if value.get("predict") is not None:
            base = self._predicted(value, depth + 1)
        elif value.get("delta") is not None:
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

    def _predicted(self, value: dict[str, Any], depth: int) -> np.ndarray:
        """SGD's prediction of the weights after the step (tvis/store/predict.py), from the
        same stored values the recorder computed it from: the base of a Δw stored as the
        XOR against it (format 5)."""
        how = value["predict"]
        try:
            hyper = predict.sgd_hyper(how) if how.get("rule") == predict.RULE else None
            weight_id, grad_id = int(value["delta"]), int(how["grad"])
        except (AttributeError, KeyError, TypeError, ValueError):
            hyper = None
        if hyper is None:
            raise StoreError(f"a Δw of {self.what} names a prediction it cannot redo.")
        before, grad = self._decode(weight_id, depth), self._decode(grad_id, depth)
        prev = None
        if how.get("prev") is not None:
            prev = self._momentum_before(how["prev"], hyper, depth)
        if not predict.usable(before, grad) or (
            prev is not None and any(a is not None and a.size != before.size for a in prev[1:])
        ):
            raise StoreError(f"a Δw of {self.what} names a prediction it cannot redo.")
        return predict.sgd_after(before, grad, hyper, prev)

    def _momentum_before(self, prev: Any, hyper: dict[str, Any], depth: int) -> tuple:
        """The previous step's learning rate and stored Δw (with its weight and gradient for
        nesterov): what SGD's momentum buffer is recovered from."""
        try:
            lr = prev["lr"]
            if type(lr) not in (int, float) or lr == 0:
                raise ValueError
            earlier, param = self._param_at(prev, depth)
        except (KeyError, TypeError, ValueError):
            raise StoreError(f"a Δw of {self.what} names a prediction it cannot redo.") from None
        if not isinstance(param.get("weight"), int):
            raise StoreError(f"a Δw of {self.what} refers to a weight missing in {earlier.what}.")
        weight = earlier._decode(param["weight"], depth)
        dw = np.asarray(np.subtract(earlier._decode(param["update"], depth), weight))
        grad = None
        if hyper["nesterov"]:
            if not isinstance(param.get("grad"), int):
                raise StoreError(
                    f"a Δw of {self.what} refers to a gradient missing in {earlier.what}."
                )
            grad = earlier._decode(param["grad"], depth)
        return float(lr), dw, weight if hyper["nesterov"] else None, grad

    def _after_at(self, base: Any, depth: int) -> np.ndarray:
        """A parameter's weight after an earlier step: the base of a weight delta."""
        earlier, param = self._param_at(base, depth)
        return earlier._decode(param["update"], depth)

    def _param_at(self, base: Any, depth: int) -> tuple[Chunk, dict[str, Any]]:
        """An earlier step and the record of the parameter ``base`` names in it."""
        if depth > MAX_CHAIN or self.open_step is None or not isinstance(base, dict):
            raise StoreError(f"{self.what} refers to an earlier step it cannot reach.")
        earlier = self.open_step(int(base.get("step", -1)))
        name = base.get("param")
        param = next((p for p in earlier.record.get("params") or [] if p.get("name") == name), None)
        if param is None or not isinstance(param.get("update"), int):
            raise StoreError(
                f"{self.what} refers to parameter {name!r}, missing in {earlier.what}."
            )
        return earlier, param

    @cached_property
    def _blob(self) -> mmap.mmap | bytes:
        try:
            with open_regular(self.path / BLOB) as f:
                if os.fstat(f.fileno()).st_size == 0:
                    return b""
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise StoreError(f"cannot read the values of {self.what}: {e.strerror}.") from None
