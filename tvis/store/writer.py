"""Writes a run directory (see format.py). Used by the recorder; knows nothing of torch."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

import numpy as np

from tvis.store import atomic, chunks, derived, host_memory, rounding
from tvis.store.codec import Encoded
from tvis.store.format import (
    ALIGN,
    BATCHES,
    BLOB,
    FORMAT_VERSION,
    INDEX,
    META,
    RUN_INDEX,
    RUNNING,
    SOURCES,
    STEPS,
    TMP_SUFFIX,
    folder_name,
)

# Bytes set aside when a run starts and freed just before it is finalized, so a disk that
# fills up during the run still takes the final index and meta.json (a few KB to a few
# hundred KB even for long runs with many notices).
FINALIZE_RESERVE = 1 << 20


class RunWriter:
    """Creates one run folder and writes its records atomically as they become ready."""

    def __init__(
        self,
        path: Path,
        meta: dict[str, Any],
        *,
        chunked: bool = True,
        mantissa_bits: int | None = None,
    ) -> None:
        """``chunked=False`` writes batch values raw, as format 2 did (what older runs on
        disk hold: for reading them in tests and benchmarks side by side).
        ``mantissa_bits``: activations and gradients are stored rounded to that many
        mantissa bits (tvis/store/rounding.py); None keeps every value exact."""
        self.path = Path(path)
        (self.path / BATCHES).mkdir(parents=True, exist_ok=False)
        (self.path / STEPS).mkdir()
        self.chunked = chunked
        if chunked:
            chunks.codecs()  # numcodecs loaded as the run starts, not in its first step's write
        self.mantissa_bits = mantissa_bits if chunked else None
        version = FORMAT_VERSION if chunked else 2
        self.meta = {"format": version, "status": RUNNING, "started": time.time(), **meta}
        if self.mantissa_bits is not None:
            self.meta["values"] = {"mantissa_bits": self.mantissa_bits}
        self.bytes_written = 0
        self._reserve = self.path / f".finalize-reserve{TMP_SUFFIX}"
        self.write_meta()
        try:
            free = shutil.disk_usage(self.path).free
            with open(self._reserve, "wb") as f:
                f.write(b"\0" * min(FINALIZE_RESERVE, free // 2))
        except OSError:
            self.release_reserve()  # a disk this full fails later, where it is reported

    def release_reserve(self) -> None:
        """Free the space set aside at the start, just before the run is finalized."""
        self._reserve.unlink(missing_ok=True)

    def write_meta(self, **updates: Any) -> None:
        self.meta.update(updates)
        try:
            atomic.write_json(self.path / META, self.meta)
        except OSError:
            # No room for a second copy: overwrite in place, in blocks the file owns.
            with open(self.path / META, "r+b") as f:
                f.write(atomic.json_bytes(self.meta))
                f.truncate()

    def write_batch(
        self, index: int, record: dict, arrays: dict[int, np.ndarray], *, handed_over: bool = False
    ) -> int:
        """Write batch ``index``: ``record["tensors"]`` entries get their ``value`` filled
        from ``arrays`` (tensor id -> array). Returns the bytes written.

        Activations and gradients are rounded first (``mantissa_bits``), then the values
        that follow exactly from a stored neighbour are written as recipes (derived.py).

        ``handed_over``: the caller is done with ``arrays``, the dict and the copies in it
        that tvis made itself (host_memory.py mappings): those are rounded in place, and
        each value leaves the dict once it is written, so a batch never lies in memory
        twice (its exact and its rounded values side by side)."""
        arrays = arrays if handed_over else dict(arrays)
        if self.chunked:
            for entry in record.get("tensors", []):
                value = entry.get("value")
                if value and ("derive" in value or "bits" in value):  # a run copied
                    entry["value"] = {k: v for k, v in value.items() if k not in ("derive", "bits")}
            rounded = self._to_stored_form(record, arrays, handed_over)
            recipes = derived.find(record, arrays)
            for entry in record.get("tensors", []):
                if entry["id"] in rounded:  # the viewer says where values are not whole
                    entry["value"] = {**(entry.get("value") or {}), "bits": self.mantissa_bits}
                recipe = recipes.get(entry["id"])
                if recipe is not None:
                    array = arrays.pop(entry["id"])
                    value = entry.get("value") or {}
                    value.setdefault("kept", "all")
                    value.update(dtype=array.dtype.str, shape=list(array.shape), derive=recipe)
                    entry["value"] = value
        # The same dict, so that what is written leaves it (a dict is invariant to mypy).
        values = cast("dict[int, np.ndarray | Encoded]", arrays)
        return self._write_chunk(self.path / BATCHES / folder_name(index), record, values)

    def _to_stored_form(self, record: dict, arrays: dict[int, np.ndarray], own: bool) -> set[int]:
        """Turn ``arrays`` into the values as they will lie in the blob: contiguous,
        little-endian, and the activations and gradients rounded (in place where ``own``
        and the array is a mapping of tvis's that no other entry shares). Returns the ids
        of those rounded."""
        bits = self.mantissa_bits
        exact = rounding.exact_ids(record) if bits is not None else set()
        sharing = Counter(id(host_memory.mapping(a)) for a in arrays.values()) if own else {}
        rounded = set()
        for tensor_id, array in arrays.items():
            array = np.ascontiguousarray(array)
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            if tensor_id not in exact and array.size and rounding.rounds(array.dtype, bits):
                mapped = host_memory.mapping(array) if own else None
                in_place = mapped is not None and sharing[id(mapped)] == 1
                array = rounding.round_mantissa(array, bits, in_place=in_place)
                rounded.add(tensor_id)
            arrays[tensor_id] = array
        return rounded

    def write_batch_record(self, index: int, record: dict) -> None:
        """Write the record of batch ``index`` again (its values stay where they are)."""
        atomic.write_msgpack(self.path / BATCHES / folder_name(index) / INDEX, record)

    def write_step(self, index: int, record: dict, arrays: dict[int, Encoded]) -> int:
        """Write optimizer step ``index`` (parameter records, same layout as a batch, values
        encoded by tvis/store/codec.py)."""
        return self._write_chunk(self.path / STEPS / folder_name(index), record, dict(arrays))

    def write_index(self, index: dict[str, Any]) -> None:
        atomic.write_msgpack(self.path / RUN_INDEX, index)

    def write_sources(self, sources: dict[str, str]) -> None:
        atomic.write_msgpack(self.path / SOURCES, sources)

    def _write_chunk(
        self, final: Path, record: dict, arrays: dict[int, np.ndarray | Encoded]
    ) -> int:
        # Build the folder under a hidden name, then rename it into place: a reader (or a
        # kill -9) sees either the whole batch or none of it.
        tmp = final.with_name(f".{final.name}{TMP_SUFFIX}")
        if tmp.exists():
            shutil.rmtree(tmp)
        try:
            tmp.mkdir()
            size = _write_blob(tmp / BLOB, record.get("tensors", []), arrays, self.chunked)
            index = atomic.msgpack.packb(record, use_bin_type=True)
            with open(tmp / INDEX, "wb") as f:
                f.write(index)
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # a half-written folder keeps a disk full
            raise
        written = size + len(index)
        self.bytes_written += written
        return written


def _write_blob(
    path: Path, entries: list[dict], arrays: dict[int, np.ndarray | Encoded], chunked: bool
) -> int:
    """Write the values of ``entries``, taking each out of ``arrays`` as it is written."""
    offset = 0
    with open(path, "wb") as f:
        for entry in entries:
            array = arrays.pop(entry["id"], None)
            if array is None:
                entry.setdefault("value", None)
                continue
            if isinstance(array, Encoded):
                offset = _write_encoded(f, offset, entry, array)
                continue
            array = np.ascontiguousarray(array)
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            if chunked and array.size and array.dtype.kind in "biufc":
                rounded = bool((entry.get("value") or {}).get("bits"))
                offset = _write_chunked(f, offset, entry, chunks.compress(array, rounded))
                continue
            pad = -offset % ALIGN
            if pad:
                f.write(b"\0" * pad)
                offset += pad
            f.write(array.data.cast("B") if array.size else b"")
            value = entry.get("value") or {}
            value.update(
                offset=offset,
                nbytes=array.nbytes,
                dtype=array.dtype.str,
                shape=list(array.shape),
            )
            value.setdefault("kept", "all")
            entry["value"] = value
            offset += array.nbytes
    return offset


def _write_encoded(f, offset: int, entry: dict, encoded: Encoded) -> int:
    """Append an encoded array; its entry's ``value`` already says how it was encoded."""
    pad = -offset % ALIGN
    f.write(b"\0" * pad)
    offset += pad
    f.write(encoded.payload)
    entry["value"].update(
        offset=offset,
        nbytes=encoded.nbytes,
        dtype=encoded.dtype.str,
        shape=list(encoded.shape),
        crc32=encoded.crc32,
    )
    return offset + encoded.nbytes


def _write_chunked(f, offset: int, entry: dict, chunked: chunks.Chunked) -> int:
    """Append an array compressed in chunks (tvis/store/chunks.py) and describe it."""
    for part in chunked.payload:
        f.write(part)
    value = entry.get("value") or {}
    value.update(
        offset=offset,
        nbytes=chunked.nbytes,
        dtype=chunked.dtype.str,
        shape=list(chunked.shape),
        codec=chunks.CODEC,
        chunk=chunked.chunk,
        sizes=chunked.sizes,
    )
    value.setdefault("kept", "all")
    entry["value"] = value
    return offset + chunked.nbytes
