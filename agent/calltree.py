"""The call tree of one batch, indexed for paging: calls by id, children, ancestors, rows.

A row is what a list shows of a call: the call without its arguments, plus its first
output's shape and stats and the norm of that output's gradient.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tvis.store.reader import CallRecords
from tvis.store.schema import LAYER_KINDS

OUTPUT_STATS = {"out_numel": "numel", "std": "std", "absmean": "absmean", "zeros": "zeros"}
"""Layer-row columns read from the first output's stats, with the stat each holds."""


class CallsById(Mapping[int, dict[str, Any]]):
    """A batch's calls by id, each checked against the schema when first read."""

    def __init__(self, calls: CallRecords) -> None:
        self._calls = calls
        self.positions: dict[int, int] = {}  # call id -> its place in the record

    def __getitem__(self, call_id: Any) -> dict[str, Any]:
        return self._calls[self.positions[call_id]]

    def __contains__(self, call_id: object) -> bool:
        return call_id in self.positions

    def __iter__(self) -> Iterator[int]:
        return iter(self.positions)

    def __len__(self) -> int:
        return len(self.positions)


class CallTree:
    """Calls of one batch record with their tensors, looked up by id."""

    def __init__(self, record: dict[str, Any], tensors: Mapping[int, dict[str, Any]]) -> None:
        calls = record.get("calls") or []
        if not isinstance(calls, CallRecords):  # a record built in memory: already sound
            calls = CallRecords(list(calls), "the batch", checked=True)
        self.order: list[int] = []
        self.by_id = CallsById(calls)
        self.children: dict[int, list[int]] = {-1: []}
        self.parent: dict[int, int] = {}
        # Only ids and parents are read here, each guarded: a call is checked against the
        # schema when something reads it through ``by_id`` (a corrupt one is named then).
        raw = calls.unchecked
        positions = self.by_id.positions
        for i, call in enumerate(raw):
            cid = call.get("id") if type(call) is dict else None
            if type(cid) is not int or cid in positions:
                continue
            self.order.append(cid)
            positions[cid] = i
            self.children[cid] = []
        for cid in self.order:
            parent = raw[positions[cid]].get("parent", -1)
            if type(parent) is not int or parent == cid or parent not in positions:
                parent = -1
            self.parent[cid] = parent
            self.children[parent].append(cid)
        self.tensors = tensors  # decoded as rows ask for them (tvis/store/reader.py)
        self._raw = raw

    def scalar(self, call_id: int, name: str) -> str | int | float | None:
        """A call's text or number field read without checking the call (anything else
        reads as None): for scans of every call, such as which calls are layers, that a
        corrupt call they do not show must not break."""
        value = self._raw[self.by_id.positions[call_id]].get(name)
        return value if type(value) in (str, int, float) else None

    def path(self, call_id: int) -> list[int]:
        """Ancestor ids of a call, the root first."""
        path: list[int] = []
        parent = self.parent[call_id]
        while parent != -1 and parent not in path:
            path.append(parent)
            parent = self.parent[parent]
        return path[::-1]

    def _label(self, call_id: int) -> str | int | float | None:
        return self.scalar(call_id, "name") or self.scalar(call_id, "cls")

    def route(self, call_id: int) -> list[tuple[Any, int]]:
        """Where a call stands in the tree, by what it is rather than by id: from the root
        down to it, each call's name (its class when unnamed) and how many siblings before
        it share that name. Another batch of the same script has the same call there."""
        route = []
        for cid in [*self.path(call_id), call_id]:
            siblings = self.children[self.parent[cid]]
            label = self._label(cid)
            before = siblings[: siblings.index(cid)]
            route.append((label, sum(1 for s in before if self._label(s) == label)))
        return route

    def follow(self, route: list[tuple[Any, int]]) -> list[int]:
        """The calls along ``route`` in this tree, root first: as far as this tree has them
        (the whole route when it has the call itself; none when not even its root)."""
        found: list[int] = []
        parent = -1
        for label, occurrence in route:
            same = [c for c in self.children.get(parent, []) if self._label(c) == label]
            if occurrence >= len(same):
                break
            parent = same[occurrence]
            found.append(parent)
        return found

    def first_output(self, call: dict[str, Any]) -> dict[str, Any] | None:
        for arg in call.get("outputs") or []:
            entry = self.tensor(arg.get("tensor")) if isinstance(arg, dict) else None
            if entry is not None:
                return entry
        return None

    def grad_output(self, call: dict[str, Any]) -> dict[str, Any] | None:
        """The first output that received a gradient, else the first output: an RNN's
        ``(output, h_n)`` of an encoder whose sequence output goes unused is reached
        through ``h_n`` alone, and that is its gradient."""
        first = None
        for arg in call.get("outputs") or []:
            entry = self.tensor(arg.get("tensor")) if isinstance(arg, dict) else None
            if entry is not None and isinstance(entry.get("grad"), int):
                return entry
            first = first or entry
        return first

    def tensor(self, tensor_id: Any) -> dict[str, Any] | None:
        return self.tensors.get(tensor_id) if isinstance(tensor_id, int) else None

    def grad_of(self, entry: dict[str, Any] | None) -> dict[str, Any] | None:
        return self.tensor(entry.get("grad")) if entry else None

    def row(self, call_id: int) -> dict[str, Any]:
        call = self.by_id[call_id]
        out = self.first_output(call)
        grad = self.grad_of(self.grad_output(call))
        row = {k: v for k, v in call.items() if k not in ("inputs", "outputs")}
        row.update(
            n_children=len(self.children.get(call_id, [])),
            out_shape=out.get("shape") if out else None,
            out_stats=out.get("stats") if out else None,
            grad_norm=(grad.get("stats") or {}).get("norm") if grad else None,
            flags=call.get("flags") or [],
        )
        return row

    def _grad_norm(self, call: dict[str, Any]) -> Any:
        grad = self.grad_of(self.grad_output(call))
        return (grad.get("stats") or {}).get("norm") if grad else None

    def layer_value(self, call_id: int, column: str) -> Any:
        """What ``layer_row`` has under ``column``, reading only the entries that takes: a
        sort by time or name decodes no tensor entry, by a statistic only the outputs'."""
        call = self.by_id[call_id]
        if column in OUTPUT_STATS:
            out = self.first_output(call)
            return ((out or {}).get("stats") or {}).get(OUTPUT_STATS[column])
        if column == "grad_norm":
            return self._grad_norm(call)
        return call.get(column)

    def layer_row(self, position: int, call_id: int) -> dict[str, Any]:
        call = self.by_id[call_id]
        out = self.first_output(call)
        stats = (out or {}).get("stats") or {}
        return {
            "id": call_id,
            "order": position,
            "name": call.get("name"),
            "cls": call.get("cls"),
            "kind": call.get("kind"),
            "depth": call.get("depth"),
            "phase": call.get("phase"),
            "out_shape": out.get("shape") if out else None,
            "out_numel": stats.get("numel"),
            "std": stats.get("std"),
            "absmean": stats.get("absmean"),
            "zeros": stats.get("zeros"),
            "nan": stats.get("nan"),
            "inf": stats.get("inf"),
            "grad_norm": self._grad_norm(call),
            "fwd_ms": call.get("fwd_ms"),
            "bwd_ms": call.get("bwd_ms"),
            "flags": call.get("flags") or [],
        }

    def layer_rows(self) -> list[dict[str, Any]]:
        return [
            self.layer_row(i, cid)
            for i, cid in enumerate(self.order)
            if self.by_id[cid].get("kind") in LAYER_KINDS
        ]

    def timeline(self, phase_ms: dict[str, Any]) -> dict[str, Any]:
        """Phase bands and one bar per call per lane, in ms since the batch began.

        Backward bars are laid out from the order gradients flow (last call first) and
        each call's inferred backward time, so they are marked approximate.
        """
        phases: list[dict[str, Any]] = []
        t = 0.0
        for name in ("data", "forward", "loss", "backward", "optimizer"):
            ms = phase_ms.get(name)
            if isinstance(ms, (int, float)) and ms > 0:
                phases.append({"phase": name, "t0": t, "t1": t + ms})
                t += ms
        bars: list[dict[str, Any]] = []
        for cid in self.order:
            call = self.by_id[cid]
            t0, ms = call.get("t0"), call.get("fwd_ms")
            if isinstance(t0, (int, float)) and isinstance(ms, (int, float)):
                bars.append(self._bar(cid, "forward", t0, t0 + ms, approx=False))
        backward = next((p["t0"] for p in phases if p["phase"] == "backward"), None)
        if backward is not None:
            self._place_backward(self.children[-1], backward, bars)
        end = max([t] + [b["t1"] for b in bars])
        return {"total_ms": end, "phases": phases, "bars": bars}

    def _bar(self, cid: int, lane: str, t0: float, t1: float, approx: bool) -> dict[str, Any]:
        call = self.by_id[cid]
        return {
            "call": cid,
            "name": call.get("name"),
            "depth": call.get("depth"),
            "lane": lane,
            "t0": t0,
            "t1": t1,
            "phase": call.get("phase"),
            "approx": approx,
        }

    def _place_backward(self, ids: list[int], cursor: float, bars: list[dict[str, Any]]) -> float:
        for cid in reversed(ids):
            start = cursor
            cursor = self._place_backward(self.children.get(cid, []), cursor, bars)
            ms = self.by_id[cid].get("bwd_ms")
            if isinstance(ms, (int, float)):
                cursor = max(cursor, start + ms)
                bars.append(self._bar(cid, "backward", start, cursor, approx=True))
        return cursor
