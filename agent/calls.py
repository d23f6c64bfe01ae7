"""The agent API's methods on a batch's calls: the call tree a page at a time, one call
in full, a search by name, the layers table, the timeline, the batch's samples, and the
source snapshot annotated with what each line produced (see PROTOCOL.md)."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np

from tvis.agent.calltree import CallTree
from tvis.agent.decode import Vocabulary, class_names, vocabulary_for
from tvis.agent.dispatch import rpc
from tvis.agent.insights.loss import sequence_columns
from tvis.agent.lookups import Lookups
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError, require_non_negative
from tvis.agent.samples import sample_rows
from tvis.store.reader import Chunk
from tvis.store.schema import LAYER_KINDS, LAYER_SORTS

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
        (i, cid) for i, cid in enumerate(tree.order) if tree.scalar(cid, "kind") in LAYER_KINDS
    ]
    kept = [(i, cid) for i, cid in every if not (skip_data and tree.scalar(cid, "phase") == "data")]
    return kept, len(every) - len(kept)


def _layer_row(tree: CallTree, layer: int, position: int, call: int) -> dict[str, Any]:
    return {**tree.layer_row(position, call), "layer": layer}


def _sorted_calls(
    tree: CallTree, calls: list[tuple[int, int, int]], sort: str, desc: bool
) -> list[tuple[int, int, int]]:
    """``(layer number, position, call id)`` of ``calls`` in ``sort`` order, rows without a
    value last either way. Only the sorted column is read: its rows are built per page."""
    keyed = [(tree.layer_value(cid, sort), item) for item in calls for cid in (item[2],)]
    present = [(v, item) for v, item in keyed if isinstance(v, (int, float, str))]
    absent = [item for v, item in keyed if not isinstance(v, (int, float, str))]
    present.sort(key=itemgetter(0), reverse=desc)
    return [item for _, item in present] + absent


class CallsAPI:
    """``calls``, ``call``, ``find``, ``layers``, ``timeline``, ``samples``, ``sources`` and
    ``source`` over the runs ``lookups`` reads."""

    def __init__(self, lookups: Lookups) -> None:
        self.lookups = lookups
        self.store = lookups.store

    @rpc
    def calls(
        self, run: str, batch: int, parent: int = -1, offset: int = 0, limit: int = 200
    ) -> dict[str, Any]:
        """One page of the children of ``parent`` (-1: the roots), in call order."""
        tree = self.lookups.tree(run, batch)
        if parent != -1:
            self.lookups.call(tree, parent)
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
        tree = self.lookups.tree(run, batch)
        record = dict(self.lookups.call(tree, call))
        data = self.store.index(run).get("data")
        vocab = Vocabulary(data)
        chunk = self.store.chunk(run, "batch", batch)
        for side in ("inputs", "outputs"):
            record[side] = [
                self._decode_arg(
                    chunk,
                    vocabulary_for(
                        data, tree, arg.get("tensor") if isinstance(arg, dict) else None
                    ),
                    self._inline(tree, arg),
                )
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

    @rpc
    def counterpart(self, run: str, batch: int, call: int, other: int) -> dict[str, Any]:
        """The call of batch ``other`` at ``call``'s place in ``batch``'s tree (the same
        names and occurrences from the root; ids differ between batches whenever one ran a
        call more or less), else the deepest of its ancestors that ``other`` has."""
        tree = self.lookups.tree(run, batch)
        self.lookups.call(tree, call)  # a call the batch lacks: 404 with one sentence
        route = tree.route(call)
        found = self.lookups.tree(run, other).follow(route)
        return {
            "call": found[-1] if found else None,
            "path": found[:-1],
            "exact": len(found) == len(route),
        }

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
    def find(
        self, run: str, batch: int, query: str, limit: int = 50, kind: str | None = None
    ) -> list[dict[str, Any]]:
        """Calls whose name or class contains ``query`` (any case; "" matches every call)
        and, with ``kind``, of that kind (module, function, loss…), in call order."""
        require_non_negative(limit=limit)
        tree = self.lookups.tree(run, batch)
        needle = query.lower()
        found = []
        for cid in tree.order:
            call = tree.by_id[cid]
            if kind is not None and call.get("kind") != kind:
                continue
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
        tree = self.lookups.tree(run, batch)
        calls, hidden = self.store.derived(
            chunk, f"layers:{skip_data}", lambda: _layer_calls(tree, skip_data)
        )
        numbered = [(n, i, cid) for n, (i, cid) in enumerate(calls, 1)]
        if sort == "order":
            # Call order is the order the calls are in.
            ordered = numbered[::-1] if desc else numbered
        else:
            # Sorted once per order, kept with the batch, so paging a 20,000-row table
            # costs a slice per page, not a sort; only the page's rows are built.
            ordered = self.store.derived(
                chunk,
                f"layers:{skip_data}:{sort}:{desc}",
                lambda: _sorted_calls(tree, numbered, sort, desc),
            )
        rows = [_layer_row(tree, *item) for item in _page(ordered, offset, limit)]
        ids = [cid for _, _, cid in ordered]
        result: dict[str, Any] = {"total": len(calls), "hidden": hidden, "rows": rows}
        if locate is not None:
            result["located"] = ids.index(locate) if locate in ids else None
        return result

    @rpc
    def timeline(self, run: str, batch: int, limit: int = 5000) -> dict[str, Any]:
        """Phase bands and per-call bars (forward lane exact, backward lane approximate)."""
        require_non_negative(limit=limit)
        chunk = self.store.chunk(run, "batch", batch)
        tree = self.lookups.tree(run, batch)
        phase_ms = (chunk.record.get("batch") or {}).get("phase_ms") or {}
        result = self.store.derived(chunk, "timeline", lambda: tree.timeline(phase_ms))
        bars = result["bars"]
        return {**result, "total": len(bars), "bars": _page(bars, 0, limit)}

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
    def samples(self, run: str, batch: int) -> dict[str, Any]:
        """The batch's samples with their input, target, prediction and loss when recorded."""
        chunk = self.store.chunk(run, "batch", batch)
        data = self.store.index(run).get("data") or {}
        loss = chunk.record.get("loss") if isinstance(chunk.record.get("loss"), dict) else None
        result = sample_rows(chunk, self.lookups.tree(run, batch), class_names(data, loss))
        sequence_columns(chunk, Vocabulary(data), result)
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
