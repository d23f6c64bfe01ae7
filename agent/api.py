"""The query API over a runs root: one method per protocol method (see PROTOCOL.md).

Each method is registered with ``@rpc``; its type hints are its parameter schema. Results
are plain maps, lists, scalars and numpy arrays; views are computed here, next to the
data, so a reply holds what one screen shows rather than whole tensors.
"""

from __future__ import annotations

import os
import socket
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from tvis import __version__
from tvis.agent import views
from tvis.agent.calltree import CallTree
from tvis.agent.decode import Vocabulary, class_names
from tvis.agent.dispatch import rpc
from tvis.agent.insights import InsightsAPI
from tvis.agent.protocol import (
    BAD_REQUEST,
    HEARTBEAT_S,
    MAX_READ,
    NOT_FOUND,
    PROTOCOL_VERSION,
    VERSION_MISMATCH,
    AgentError,
    RawBytes,
    mismatch_message,
    require_non_negative,
)
from tvis.agent.ranks import RanksAPI
from tvis.agent.replay import ReplayAPI
from tvis.agent.samples import sample_rows
from tvis.agent.store import RunStore
from tvis.agent.traffic import Traffic
from tvis.agent.watch import WatchAPI
from tvis.agent.weights import WeightsAPI
from tvis.store.chunks import ChunkedArray
from tvis.store.reader import Chunk, RunReader, StoreError, leads_outside
from tvis.store.schema import LAYER_KINDS, LAYER_SORTS
from tvis.store.watch import describe as describe_watch

# A raw array reply stays well under the 64 MiB frame limit with its record around it.
MAX_ARRAY_BYTES = 48 << 20
# Token ids decoded per argument: a long sentence; the pipeline view pages past this.
MAX_DECODED = 512
# Pages of calls: a screen shows tens of rows; a few thousand bound the reply for any model.
MAX_PAGE = 5000


def _page(rows: list[Any], offset: int, limit: int) -> list[Any]:
    require_non_negative(offset=offset, limit=limit)
    return rows[offset : offset + min(limit, MAX_PAGE)]


def _layer_calls(tree: CallTree, skip_data: bool) -> tuple[list[tuple[int, int]], int]:
    """``(position in call order, call id)`` of each layer row kept, in call order, and how
    many data-pipeline rows were left out. Cheap: no row is built."""
    every = [
        (i, cid) for i, cid in enumerate(tree.order) if tree.by_id[cid].get("kind") in LAYER_KINDS
    ]
    kept = [
        (i, cid) for i, cid in every if not (skip_data and tree.by_id[cid].get("phase") == "data")
    ]
    return kept, len(every) - len(kept)


def _layer_row(tree: CallTree, layer: int, position: int, call: int) -> dict[str, Any]:
    return {**tree.layer_row(position, call), "layer": layer}


def _sorted_rows(rows: list[dict[str, Any]], sort: str, desc: bool) -> list[dict[str, Any]]:
    """``rows`` in ``sort`` order; rows without a value last either way."""
    present = [r for r in rows if isinstance(r.get(sort), (int, float, str))]
    absent = [r for r in rows if not isinstance(r.get(sort), (int, float, str))]
    present.sort(key=itemgetter(sort), reverse=desc)
    return present + absent


class AgentAPI(ReplayAPI, InsightsAPI, RanksAPI, WeightsAPI, WatchAPI):
    """Answers the protocol's methods for the runs under ``root``; safe to share between threads.
    The insight pages' methods come from ``InsightsAPI`` (agent/insights/), the comparison
    of a multi-process recording's ranks from ``RanksAPI`` (agent/ranks.py), the Weights
    page's views from ``WeightsAPI`` (agent/weights.py), Replay's from ``ReplayAPI``
    (agent/replay.py), a watched run's series from ``WatchAPI`` (agent/watch.py)."""

    def __init__(self, root: Path | str) -> None:
        self.store = RunStore(root)
        self.traffic = Traffic()

    # -- shared lookups ------------------------------------------------------------------

    def _chunk(self, run: str, batch: int | None, step: int | None) -> Chunk:
        if (batch is None) == (step is None):
            raise AgentError("give exactly one of 'batch' and 'step'.", BAD_REQUEST)
        if batch is not None:
            return self.store.chunk(run, "batch", batch)
        return self.store.chunk(run, "step", step)  # type: ignore[arg-type]

    def _tree(self, run: str, batch: int) -> CallTree:
        chunk = self.store.chunk(run, "batch", batch)
        return self.store.derived(chunk, "tree", lambda: CallTree(chunk.record, chunk.tensors))

    def _call(self, tree: CallTree, call: int) -> dict[str, Any]:
        if call not in tree.by_id:
            raise AgentError(f"this batch has no call {call}.", NOT_FOUND)
        return tree.by_id[call]

    def _entry(self, chunk: Chunk, tensor: int, grad: bool) -> dict[str, Any]:
        entry = chunk.tensor(tensor)
        if not grad:
            return entry
        grad_id = entry.get("grad")
        if grad_id is None:
            raise AgentError(f"tensor {tensor} has no recorded gradient.", NOT_FOUND)
        return chunk.tensor(grad_id)

    def _values(self, chunk: Chunk, entry: dict[str, Any]) -> np.ndarray:
        values = chunk.array(entry["id"])
        if values is None:
            raise AgentError(
                f"tensor {entry['id']} of {chunk.what} has stats only; its values were not kept.",
                NOT_FOUND,
            )
        return values

    def _normalize(self, run: str) -> Any:
        return (self.store.index(run).get("data") or {}).get("normalize")

    # -- methods -------------------------------------------------------------------------

    @rpc
    def hello(self, protocol: int, version: str = "?", **_: Any) -> dict[str, Any]:
        """The handshake: versions on both sides, and what this agent serves."""
        host = socket.gethostname()
        if protocol != PROTOCOL_VERSION:
            raise AgentError(
                mismatch_message(version, protocol, host, __version__, PROTOCOL_VERSION),
                VERSION_MISMATCH,
            )
        return {
            "protocol": PROTOCOL_VERSION,
            "version": __version__,
            "root": str(self.store.root),
            "host": host,
            "pid": os.getpid(),
            "runs": len(self.store.run_paths()),
            # the stdio server beats while requests are pending for a client that asks
            "heartbeat": HEARTBEAT_S,
        }

    @rpc
    def runs(self) -> list[dict[str, Any]]:
        """Every run under the root, newest first; a broken run is listed with its problem."""
        return [self._summary(path) for path in self.store.run_paths()]

    def _summary(self, path: Path) -> dict[str, Any]:
        name = self.store.name_of(path)
        outside = leads_outside(self.store.root, path)
        if outside is not None:
            return {"run": name, "run_id": path.name, "status": "unreadable", "error": outside}
        try:
            reader = self.store.reader(name)
            index = self.store.index(name)
        except (StoreError, AgentError) as e:
            return {"run": name, "run_id": path.name, "status": "unreadable", "error": str(e)}
        batches = index.get("batches") or []
        return {
            "run": name,
            "run_id": reader.run_id,
            "script": reader.meta.get("script"),
            "status": reader.status,
            "started": reader.meta.get("started"),
            "ended": reader.meta.get("ended"),
            "steps": len(index.get("steps") or []),
            "batches": len(batches),
            "calls": sum(b.get("n_calls", 0) for b in batches if isinstance(b, dict)),
            "bytes": reader.size_bytes(),
            "host": reader.meta.get("host"),
            "rank": (reader.meta.get("rank") or {}).get("rank"),
            "watch": describe_watch(reader.meta),
        }

    @rpc
    def run(self, run: str) -> dict[str, Any]:
        """The run index plus its meta and status."""
        reader: RunReader = self.store.reader(run)
        index = self.store.index(run)
        return {
            **index,
            "run": run,
            "run_id": reader.run_id,
            "meta": reader.meta,
            "status": reader.status,
            "batches": index.get("batches") or [],
            "steps": index.get("steps") or [],
            "params": index.get("params") or [],
            "notices": index.get("notices") or [],
            "data": index.get("data") or {},
            "rank": reader.meta.get("rank"),
            "ranks": self.rank_siblings(run),
        }

    @rpc
    def calls(
        self, run: str, batch: int, parent: int = -1, offset: int = 0, limit: int = 200
    ) -> dict[str, Any]:
        """One page of the children of ``parent`` (-1: the roots), in call order."""
        tree = self._tree(run, batch)
        if parent != -1:
            self._call(tree, parent)
        children = tree.children.get(parent, [])
        reply = {
            "total": len(children),
            "calls": [tree.row(c) for c in _page(children, offset, limit)],
        }
        # Calls the cap left out where they ran (records before parents were noted: roots).
        sites = self.store.chunk(run, "batch", batch).record.get("dropped_sites") or []
        reply["dropped"] = [
            s for s in sites if isinstance(s, dict) and s.get("parent", -1) == parent
        ]
        return reply

    @rpc
    def call(self, run: str, batch: int, call: int) -> dict[str, Any]:
        """One call in full: each tensor argument's entry (and its gradient's) inlined."""
        tree = self._tree(run, batch)
        record = dict(self._call(tree, call))
        vocab = Vocabulary(self.store.index(run).get("data"))
        chunk = self.store.chunk(run, "batch", batch)
        for side in ("inputs", "outputs"):
            record[side] = [
                self._decode_arg(chunk, vocab, self._inline(tree, arg))
                for arg in record.get(side) or []
            ]
        record["tokens"] = [
            {**t, "decoded": [vocab.text(ids) for ids in t.get("ids") or []]}
            for t in chunk.record.get("tokens") or []
            if isinstance(t, dict) and t.get("call") == call
        ]
        record["path"] = tree.path(call)
        record["n_children"] = len(tree.children.get(call, []))
        return record

    def _decode_arg(self, chunk: Chunk, vocab: Vocabulary, arg: Any) -> Any:
        """Token ids in an argument as text: a list of ids, or the first sample of an
        integer tensor whose values were kept, when the run knows a vocabulary."""
        if not isinstance(arg, dict) or not vocab.known:
            return arg
        if isinstance(arg.get("ids"), list):
            return {**arg, "decoded": vocab.decoded(arg["ids"][:MAX_DECODED])}
        entry = arg.get("entry")
        shape = (entry or {}).get("shape") or []
        if not entry or not str(entry.get("dtype", "")).startswith("int") or len(shape) > 2:
            return arg
        values = chunk.array(entry["id"])
        if values is None or values.size == 0:
            return arg
        values = np.asarray(values)
        # The first sample: a sequence-first [T, B] batch keeps its samples along dim 1.
        axis = 1 if entry.get("batch_dim") == 1 else 0
        row = values.reshape(-1) if values.ndim < 2 else np.take(values, 0, axis=axis)
        ids = [int(i) for i in row[:MAX_DECODED]]
        if min(ids) < 0 or max(ids) >= len(vocab.tokens):
            return arg  # not ids of this vocabulary (class labels, positions, ...)
        return {**arg, "decoded": {**vocab.decoded(ids), "sample": 0 if values.ndim == 2 else None}}

    def _inline(self, tree: CallTree, arg: Any) -> Any:
        entry = tree.tensor(arg.get("tensor")) if isinstance(arg, dict) else None
        if entry is None:
            return arg
        entry = dict(entry)
        grad = tree.grad_of(entry)
        if grad is not None:
            entry["grad_entry"] = grad
        return {**arg, "entry": entry}

    @rpc
    def find(self, run: str, batch: int, query: str, limit: int = 50) -> list[dict[str, Any]]:
        """Calls whose name or class contains ``query`` (any case), in call order."""
        require_non_negative(limit=limit)
        tree = self._tree(run, batch)
        needle = query.lower()
        found = []
        for cid in tree.order:
            call = tree.by_id[cid]
            text = f"{call.get('name') or ''}\n{call.get('cls') or ''}".lower()
            if needle in text:
                found.append({**tree.row(cid), "path": tree.path(cid)})
                if len(found) >= min(limit, MAX_PAGE):
                    break
        return found

    @rpc
    def layers(
        self,
        run: str,
        batch: int,
        sort: str = "order",
        desc: bool = False,
        offset: int = 0,
        limit: int = 500,
        skip_data: bool = False,
        locate: int | None = None,
    ) -> dict[str, Any]:
        """Every module, function and loss call as one table row, sorted by ``sort``; a page
        of them. ``skip_data`` leaves out the data pipeline's calls; ``locate`` asks where a
        call's row is in this order (so a viewer paging the table can jump to it)."""
        if sort not in LAYER_SORTS:
            raise AgentError(
                f"cannot sort layers by {sort!r}; use one of {', '.join(LAYER_SORTS)}.",
                BAD_REQUEST,
            )
        chunk = self.store.chunk(run, "batch", batch)
        tree = self._tree(run, batch)
        calls, hidden = self.store.derived(
            chunk, f"layers:{skip_data}", lambda: _layer_calls(tree, skip_data)
        )
        if sort == "order":
            # Call order is the order the calls are in: build only the page's rows.
            numbered = [(n, i, cid) for n, (i, cid) in enumerate(calls, 1)]
            ordered = numbered[::-1] if desc else numbered
            rows = [_layer_row(tree, *item) for item in _page(ordered, offset, limit)]
            ids = [cid for _, _, cid in ordered]
        else:
            # Every row is needed to sort: built and sorted once per order, kept with the
            # batch, so paging a 20,000-row table costs a slice per page, not a sort.
            every = self.store.derived(
                chunk,
                f"layers:{skip_data}:rows",
                lambda: [_layer_row(tree, n, i, cid) for n, (i, cid) in enumerate(calls, 1)],
            )
            ordered = self.store.derived(
                chunk, f"layers:{skip_data}:{sort}:{desc}", lambda: _sorted_rows(every, sort, desc)
            )
            rows = _page(ordered, offset, limit)
            ids = [r["id"] for r in ordered]
        result: dict[str, Any] = {"total": len(calls), "hidden": hidden, "rows": rows}
        if locate is not None:
            result["located"] = ids.index(locate) if locate in ids else None
        return result

    @rpc
    def timeline(self, run: str, batch: int, limit: int = 5000) -> dict[str, Any]:
        """Phase bands and per-call bars (forward lane exact, backward lane approximate)."""
        require_non_negative(limit=limit)
        chunk = self.store.chunk(run, "batch", batch)
        tree = self._tree(run, batch)
        phase_ms = (chunk.record.get("batch") or {}).get("phase_ms") or {}
        result = self.store.derived(chunk, "timeline", lambda: tree.timeline(phase_ms))
        bars = result["bars"]
        return {**result, "total": len(bars), "bars": _page(bars, 0, limit)}

    @rpc
    def tensor(
        self, run: str, tensor: int, batch: int | None = None, step: int | None = None
    ) -> dict[str, Any]:
        """A tensor entry (stats, histogram, value layout), its gradient's entry inlined."""
        chunk = self._chunk(run, batch, step)
        entry = dict(chunk.tensor(tensor))
        if entry.get("grad") is not None:
            entry["grad_entry"] = chunk.tensors.get(entry["grad"])
        return entry

    @rpc
    def view(
        self,
        run: str,
        tensor: int,
        batch: int | None = None,
        step: int | None = None,
        grad: bool = False,
        sample: int | None = None,
        index: list[int] | None = None,
        window: list[int] | None = None,
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """A 2-D window of a tensor (or its gradient) for one sample, block-mean downsampled."""
        chunk = self._chunk(run, batch, step)
        entry = self._entry(chunk, tensor, grad)
        values = self._values(chunk, entry)
        result = views.heatmap(
            values,
            batch_dim=entry.get("batch_dim"),
            sample=sample,
            index=index or [],
            window=window,
            width=width,
            height=height,
        )
        result.update(tensor=entry["id"], kept=(entry.get("value") or {}).get("kept", "all"))
        return result

    @rpc
    def image(
        self,
        run: str,
        batch: int,
        tensor: int,
        sample: int = 0,
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """One sample of an image tensor as uint8 pixels, un-normalized with the recorded
        mean/std and shrunk to fit ``width`` × ``height``."""
        chunk = self.store.chunk(run, "batch", batch)
        entry = chunk.tensor(tensor)
        values = self._values(chunk, entry)
        batch_dim = entry.get("batch_dim")
        if batch_dim is None and values.ndim == 4:
            batch_dim = 0  # an NCHW batch whose batch dim the recorder could not name
        one = views.take_sample(values, batch_dim, sample)
        return views.picture(one, self._normalize(run), width, height)

    @rpc
    def array(
        self,
        run: str,
        tensor: int,
        batch: int | None = None,
        step: int | None = None,
        grad: bool = False,
        max_elems: int = 65536,
        start: int = 0,
    ) -> dict[str, Any]:
        """A tensor's stored values from row ``start``, at most ``max_elems`` of them (and
        at most 48 MiB); page through a big tensor with ``next``."""
        chunk = self._chunk(run, batch, step)
        entry = self._entry(chunk, tensor, grad)
        values = self._values(chunk, entry)
        cap = max(MAX_ARRAY_BYTES // max(values.itemsize, 1), 1)
        result = views.bounded(values, min(max_elems, cap), start)
        result.update(shape=list(values.shape), kept=(entry.get("value") or {}).get("kept", "all"))
        return result

    @rpc
    def read(
        self,
        run: str,
        tensor: int,
        batch: int | None = None,
        step: int | None = None,
        grad: bool = False,
        offset: int = 0,
        length: int = MAX_READ,
    ) -> RawBytes:
        """Bytes ``offset`` to ``offset + length`` (at most 16 MiB) of a tensor's stored
        values, C order, little-endian, as a data frame; the layout is the entry's
        ``value`` (dtype, shape, nbytes). Clients ask for several ranges at once."""
        chunk = self._chunk(run, batch, step)
        entry = self._entry(chunk, tensor, grad)
        values = self._values(chunk, entry)
        if offset < 0 or length < 0 or length > MAX_READ:
            raise AgentError(f"read needs offset >= 0 and 0 <= length <= {MAX_READ}.", BAD_REQUEST)
        if offset > values.nbytes:
            raise AgentError(
                f"offset {offset} is past the {values.nbytes} bytes of tensor {entry['id']}.",
                BAD_REQUEST,
            )
        if isinstance(values, ChunkedArray):  # decode only the chunks of this range
            return RawBytes(memoryview(values.byte_range(offset, length)))
        # (a uint8 view, not memoryview.cast: that refuses 0-d arrays and unusual dtypes)
        data = memoryview(values.reshape(-1).view(np.uint8))
        return RawBytes(data[offset : offset + length])

    @rpc
    def sources(self, run: str) -> list[str]:
        """The files in the run's source snapshot."""
        return sorted(self.store.sources(run))

    @rpc
    def source(self, run: str, file: str, batch: int | None = None) -> dict[str, Any]:
        """A file's snapshot and what each executed line produced, merged over the batches
        (or for one ``batch``)."""
        sources = self.store.sources(run)
        if file not in sources:
            raise AgentError(f"{file} is not in the run's source snapshot.", NOT_FOUND)
        batches = [batch] if batch is not None else self.store.reader(run).batch_ids()
        lines: dict[int, dict[tuple, dict[str, Any]]] = {}
        for b in batches:
            chunk = self.store.chunk(run, "batch", b)
            record = chunk.record
            ran = set()
            for entry in record.get("lines") or []:
                if isinstance(entry, dict) and entry.get("file") == file:
                    self._merge_line(lines, entry, b)
                    ran.add(entry.get("line"))
            for entry in _call_site_lines(chunk, file, ran):
                self._merge_line(lines, entry, b)
        return {
            "file": file,
            "text": sources[file],
            "lines": {n: list(by_key.values()) for n, by_key in sorted(lines.items())},
        }

    @staticmethod
    def _merge_line(lines: dict[int, dict[tuple, dict[str, Any]]], entry: dict, batch: int) -> None:
        line = entry.get("line")
        if not isinstance(line, int):
            return
        shape = entry.get("shape")
        key = (
            entry.get("op"),
            tuple(shape) if isinstance(shape, list) else shape,
            entry.get("dtype"),
        )
        merged = lines.setdefault(line, {}).get(key)
        if merged is None:
            lines[line][key] = {**entry, "batches": [batch]}
            return
        merged["count"] = (merged.get("count") or 0) + (entry.get("count") or 0)
        merged["ms"] = (merged.get("ms") or 0.0) + (entry.get("ms") or 0.0)
        if batch not in merged["batches"]:
            merged["batches"].append(batch)

    @rpc
    def step(self, run: str, step: int) -> dict[str, Any]:
        """An optimizer step: its record and every parameter's record with norms."""
        record = self.store.chunk(run, "step", step).record
        return {"step": record.get("step") or {}, "params": record.get("params") or []}

    @rpc
    def param(
        self,
        run: str,
        step: int,
        name: str,
        which: str = "weight",
        index: list[int] | None = None,
        window: list[int] | None = None,
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """Like ``view``, for a parameter's weight, gradient or update at a step."""
        if which not in ("weight", "grad", "update"):
            raise AgentError("which must be 'weight', 'grad' or 'update'.", BAD_REQUEST)
        chunk = self.store.chunk(run, "step", step)
        record = next((p for p in chunk.record.get("params") or [] if p.get("name") == name), None)
        if record is None:
            raise AgentError(f"step {step} has no parameter {name!r}.", NOT_FOUND)
        tensor = record.get(which)
        if not isinstance(tensor, int):
            raise AgentError(
                f"parameter {name!r} has no recorded {which} at step {step}.", NOT_FOUND
            )
        result = self.view(
            run, tensor, step=step, index=index, window=window, width=width, height=height
        )
        result.update(name=name, which=which)
        return result

    @rpc
    def samples(self, run: str, batch: int) -> dict[str, Any]:
        """The batch's samples with their input, target, prediction and loss when recorded."""
        chunk = self.store.chunk(run, "batch", batch)
        data = self.store.index(run).get("data") or {}
        loss = chunk.record.get("loss") if isinstance(chunk.record.get("loss"), dict) else None
        result = sample_rows(chunk, self._tree(run, batch), class_names(data, loss))
        self._sequence_columns(chunk, Vocabulary(data), result)
        return result


def _call_site_lines(chunk, file: str, ran: set) -> list[dict[str, Any]]:
    """Lines of ``file`` that called a recorded call but ran no op of their own there (a
    loss function whose ops run inside the library): annotated with the call's output."""
    found = []
    for call in chunk.record.get("calls") or []:
        site = call.get("site") if isinstance(call, dict) else None
        if not (isinstance(site, list) and len(site) == 2 and site[0] == file):
            continue
        if site[1] in ran or not isinstance(site[1], int):
            continue
        out = next((o for o in call.get("outputs") or [] if isinstance(o, dict)), {})
        entry = chunk.tensors.get(out.get("tensor")) if out.get("tensor") is not None else None
        found.append(
            {
                "file": file,
                "line": site[1],
                "op": call.get("name"),
                "shape": (entry or {}).get("shape"),
                "dtype": (entry or {}).get("dtype"),
                "count": 1,
                "ms": call.get("fwd_ms"),
                "call": call.get("id"),
            }
        )
    return found
