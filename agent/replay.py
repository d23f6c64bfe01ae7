"""The replay method of the agent API: a recording as an ordered list of events (what
Replay plays back; see PROTOCOL.md). The views of one event's layer are in
agent/layer_api.py.

Events of a batch, in the order training made them happen::

    batch (data) → each pipeline stage of the followed sample (data)
    → each forward layer, in the order it returned (forward) → the loss (loss)
    → each layer again as its gradient arrived (backward)
    → after the last batch of a step: one update per parameter group (optimizer)

Gradient arrival order is read from the gradient entries' ids: the recorder adds a
gradient's entry the moment it first arrives, so a lower id arrived earlier. Batches kept
as statistics only (light) or run without gradients follow one another as one collapsible
``light`` event; a group named in ``expand`` keeps that event and adds its forward calls
after it, so a player steps through them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tvis.agent.calltree import CallTree
from tvis.agent.dispatch import long_rpc
from tvis.agent.insights.common import stamp
from tvis.agent.insights.pipeline import item_calls, returned_order, stage_output
from tvis.agent.lookups import Lookups
from tvis.agent.protocol import BAD_REQUEST, AgentError
from tvis.agent.replies import REPLAY_DETAILS
from tvis.agent.samples import model_input
from tvis.agent.traffic import Traffic
from tvis.store.format import COMPLETE
from tvis.store.lru import LRU
from tvis.store.reader import CallRecords, Chunk, StoreError
from tvis.store.schema import stat_flags

DETAILS = REPLAY_DETAILS
# Characters of the exception's message quoted in the crash note: enough to recognise it;
# the whole traceback is in the run's meta.
MAX_ERROR_CHARS = 80
# Light groups opened at once: a viewer opens them one keypress at a time; the bound keeps
# the event cache's keys small.
MAX_EXPANDED = 64
# Events sent at once: a page of ~200 bytes each stays far below a screenful of pictures,
# and a client asks for the pages around its cursor only.
MAX_EVENTS = 2000
# Parameters listed per group in an update event: the ones that moved most.
TOP_PARAMS = 5
# Event lists kept built (per run, followed sample and detail): a viewer follows one
# sample at a time and prefetches its neighbours.
EVENT_CACHE = 16
# Calls built before a first page goes out even when the page itself is built: a small
# run's whole list then comes in one reply, a big run's (20,000 calls) page first.
EAGER_CALLS = 2_000
# Layers read between two chances for a short request to pass (agent/traffic.py): a few
# milliseconds of work.
GIVE_WAY_EVERY = 256


class EventList:
    """One run's events for one followed sample, detail and set of opened groups, built a
    piece at a time (a training batch's data and forward events, then its gradients, then
    its step's updates) as far as the pages asked for need.

    Only whole pieces are published: ``published`` events and ``rows`` batch rows never
    change once a reply has sent them (a light group is published when it closes), so
    a first page can go out while the rest of a big run is still being built. Reading
    what is published takes no lock; building takes ``_building``, one piece at a time."""

    def __init__(self, build: Callable[[EventList], Iterator[None]]) -> None:
        self.events: list[dict[str, Any]] = []
        self.batches: list[dict[str, Any]] = []
        self.missing: list[str] = []
        self.published = 0
        self.rows = 0
        self.calls_built = 0  # calls of the batches built so far (``EAGER_CALLS``)
        self.complete = False
        self._outline: list[dict[str, Any]] | None = None  # of the complete list
        self._pieces = build(self)
        self._building = threading.Lock()
        self._reading = threading.Lock()
        self._failed: BaseException | None = None

    def publish(self, row: dict[str, Any] | None = None, **changes: Any) -> None:
        """Make every event and batch row built so far visible to replies (with
        ``changes`` to a published ``row``: its batch's count grew)."""
        with self._reading:
            for i in range(self.published, len(self.events)):
                self.events[i]["seq"] = i
            if row is not None:
                row.update(changes)
            self.published, self.rows = len(self.events), len(self.batches)

    def snapshot(self) -> tuple[int, list[dict[str, Any]], list[str]]:
        """The events published, copies of their batch rows, and the notes so far."""
        with self._reading:
            rows = [dict(b) for b in self.batches[: self.rows]]
            return self.published, rows, list(self.missing)

    def fill(self, enough: Callable[[EventList], bool]) -> None:
        """Build pieces until ``enough(self)`` or the list is complete."""
        while not (self.complete or enough(self)):
            with self._building:
                if self._failed is not None:  # another request's build broke: not complete
                    raise self._failed
                if self.complete or enough(self):
                    return
                try:
                    next(self._pieces)
                except StopIteration:
                    self.publish()
                    self.complete = True
                except BaseException as e:
                    self._failed = e
                    raise

    def outline(self, published: int) -> list[dict[str, Any]]:
        if not self.complete:
            return _outline(self.events[:published])
        if self._outline is None:
            self._outline = _outline(self.events)
        return self._outline


class ReplayAPI:
    """``replay`` over the runs ``lookups`` reads; a build gives way to the short requests
    ``traffic`` counts. The event lists built (whole or in part) are kept, keyed by run,
    sample, detail, the index's stamp and the groups opened."""

    def __init__(self, lookups: Lookups, traffic: Traffic) -> None:
        self.lookups = lookups
        self.store = lookups.store
        self.traffic = traffic
        self._event_lists = LRU(EVENT_CACHE)

    @long_rpc
    def replay(
        self,
        run: str,
        sample: int = 0,
        detail: str = "layer",
        offset: int = 0,
        limit: int = 200,
        expand: list[int] | None = None,
        whole: bool = True,
    ) -> dict[str, Any]:
        """One page of the run's events for followed ``sample``, with the outline of the
        whole recording (phase runs and batch starts) a scrubber draws. ``expand`` names
        light groups (by their first batch) whose forward calls become events.

        With ``whole`` false the answer goes out once the page is built (and the first
        ``EAGER_CALLS`` calls): ``complete`` false then says that ``total``, ``outline``,
        ``batches`` and ``missing`` cover the events built so far, and asking again with
        ``whole`` gives them for the whole run."""
        if detail not in DETAILS:
            raise AgentError(f"detail must be one of {', '.join(DETAILS)}.", BAD_REQUEST)
        if sample < 0 or offset < 0 or limit < 0:
            raise AgentError("sample, offset and limit must be 0 or more.", BAD_REQUEST)
        if len(expand or []) > MAX_EXPANDED:
            raise AgentError(f"expand at most {MAX_EXPANDED} light groups.", BAD_REQUEST)
        opened = frozenset(expand or [])
        index = self.store.index(run)
        key = (str(self.store.run_path(run)), sample, detail, stamp(index), opened)

        def build(listed: EventList) -> Iterator[None]:
            return self._pieces(listed, run, index, sample, detail, opened)

        listed = self._event_lists.get(key, lambda: EventList(build))
        end = offset + min(limit, MAX_EVENTS)
        try:
            if whole:
                listed.fill(lambda e: False)
            else:
                listed.fill(lambda e: e.published >= end and e.calls_built >= EAGER_CALLS)
        except BaseException:
            # A build that failed is not kept half done: the next request starts again.
            self._event_lists.put(key, EventList(build))
            raise
        complete = listed.complete
        published, rows, missing = listed.snapshot()
        trees: dict[int, CallTree] = {}  # a page's batches' trees, each looked up once
        return {
            "total": published,
            "complete": complete,
            "sample": sample,
            "detail": detail,
            "status": self.store.reader(run).status,
            "outline": listed.outline(published),
            "batches": rows,
            "missing": missing,
            "events": [
                self._with_tensors(run, e, trees)
                for e in listed.events[offset : min(end, published)]
            ],
        }

    def _with_tensors(
        self, run: str, event: dict[str, Any], trees: dict[int, CallTree]
    ) -> dict[str, Any]:
        """``event`` with its tensor fields, added in place the first time it is sent (one
        ``update``: a reply encoded on another thread sees all of them or none). A call
        that cannot be read leaves them empty (the build names it in ``missing``)."""
        if event["kind"] in ("layer", "grad") and "flags" not in event:
            batch = event["batch"]
            try:
                if batch not in trees:
                    trees[batch] = self.lookups.tree(run, batch)
                fields = _tensor_fields(trees[batch], event["call"])
            except StoreError:
                fields = dict.fromkeys(("tensor", "grad", "shape", "absmean", "grad_norm"))
                fields["flags"] = []
            event.update(fields)
        return event

    def _pieces(
        self,
        listed: EventList,
        run: str,
        index: dict[str, Any],
        sample: int,
        detail: str,
        opened: frozenset[int],
    ) -> Iterator[None]:
        """Builds ``listed``'s events, yielding after each piece (see ``EventList``)."""
        events, batches, missing = listed.events, listed.batches, listed.missing
        steps = {s["index"]: s for s in index.get("steps") or [] if isinstance(s, dict)}
        last_of_step = {max(s.get("batches") or [-1]): i for i, s in steps.items()}
        kept: int | None = None
        light: dict[str, Any] | None = None
        light_at = 0  # where the open light group's event is
        for info in index.get("batches") or []:
            if not isinstance(info, dict) or not isinstance(info.get("index"), int):
                continue
            self.traffic.give_way()
            b = info["index"]
            if info.get("light") or info.get("no_grad"):
                if light is None:
                    light_at = len(events)
                    light = _event("forward", "light", info, batches=[], name="", group=b)
                    light.update(open=b in opened, n_calls=0, repeats=0, dropped=0)
                    events.append(light)
                light["batches"].append(b)
                light["name"] = _light_name(light["batches"], info)
                light["n_calls"] += int(info.get("n_calls") or 0)
                # What ran but was only counted: repeated forwards, and calls past the cap.
                repeats = int(info.get("repeats") or 0)
                light["repeats"] += repeats
                light["dropped"] += int(info.get("dropped_calls") or 0) - repeats
                # Closed, every batch of the group is its one event; opened, each its calls
                # (the first batch also owns the group's event, where it starts).
                start = light_at if b == light["group"] or not light["open"] else len(events)
                if light["open"]:
                    events.extend(self._light_calls(run, info, detail, light["group"], missing))
                if start == len(events):  # opened but without forward calls of its own
                    start = light_at
                batches.append(_batch_row(info, start, max(1, len(events) - start), None))
                listed.calls_built += int(info.get("n_calls") or 0)
                yield  # not published: the group's event changes until the group closes
                continue
            light = None
            listed.publish()  # a light group before this batch is closed
            start = len(events)
            try:
                chunk = self.store.chunk(run, "batch", b)
                tree = self.lookups.tree(run, b)
                forward = batch_forward(chunk, tree, info, sample, detail)
                kept_here = _kept_samples(chunk, tree)
            except AgentError as e:
                missing.append(f"batch {b} cannot be read: {e.message}")
                continue
            except StoreError as e:  # a corrupt call or entry, met as the events read it
                missing.append(f"batch {b} cannot be read: {e}")
                continue
            events.extend(forward)
            row = _batch_row(info, start, len(events) - start, None)
            batches.append(row)
            listed.calls_built += len(tree.order)
            listed.publish()
            yield
            events.extend(batch_backward(tree, info, forward, missing, self.traffic.give_way))
            kept = _min(kept, kept_here)
            note = _batch_note(chunk.record, info)
            if note:
                missing.append(note)
            step = last_of_step.get(b)
            if step is not None and step in steps:
                self.traffic.give_way()
                events.extend(self._update_events(run, steps[step], info))
            listed.publish(row, count=len(events) - start, note=note)
            yield
        stopped = self._stopped_batch(run, index)
        crash = crash_note(self.store.reader(run).meta, index, stopped)
        notes = list(missing)
        if crash and stopped:
            # The crash note says what the stopped batch lacks: one line, not two.
            notes = [m for m in notes if not m.startswith(f"batch {stopped['batch']} ")]
        notes[:0] = self._run_notes(run, index, kept, sample, crash)
        listed.missing[:] = notes

    def _light_calls(
        self, run: str, info: dict[str, Any], detail: str, group: int, missing: list[str]
    ) -> list[dict[str, Any]]:
        """An opened light batch's forward calls as layer events (statistics only: a light
        batch keeps no values and has no gradients), each naming its ``group``."""
        b = info["index"]
        try:
            chunk = self.store.chunk(run, "batch", b)
            tree = self.lookups.tree(run, b)
        except AgentError as e:
            missing.append(f"batch {b} cannot be read: {e.message}")
            return []
        owners = {
            a["call"]
            for a in chunk.record.get("attention") or []
            if isinstance(a, dict) and isinstance(a.get("call"), int)
        }
        events = []
        for cid in _forward_calls(tree, detail, owners):
            event = _layer_event(tree, cid, "forward", info)
            event["group"] = group
            events.append(event)
        return events

    def _run_notes(
        self,
        run: str,
        index: dict[str, Any],
        kept: int | None,
        sample: int,
        crash: str | None,
    ) -> list:
        notes = []
        status = self.store.reader(run).status
        if crash:
            notes.append(crash)
        elif status != COMPLETE:
            n = len(index.get("batches") or [])
            notes.append(f"the run is {status}: replaying the {n} batch(es) recorded so far.")
        if kept == 0:
            notes.append(
                "no sample values were kept in this recording (raise --max-bytes to keep "
                "them): layers show statistics only."
            )
        elif kept is not None and sample >= kept:
            notes.append(
                f"sample {sample} was not kept (values exist for the first {kept}); "
                "pictures show what exists."
            )
        return notes

    def _stopped_batch(self, run: str, index: dict[str, Any]) -> dict[str, Any] | None:
        """The last training batch when it stopped before its loss (a crash mid-forward):
        ``{batch, last}`` with the name of the last call that returned, if any."""
        trained = [
            b for b in index.get("batches") or [] if isinstance(b, dict) and not b.get("light")
        ]
        if not trained or trained[-1].get("loss") is not None:
            return None
        b = trained[-1]["index"]
        try:
            chunk, tree = self.store.chunk(run, "batch", b), self.lookups.tree(run, b)
        except AgentError:
            return {"batch": b, "last": None}
        if isinstance(chunk.record.get("loss"), dict):
            return None
        returned = [
            tree.by_id[cid].get("name")
            for cid in _forward_calls(tree, "layer", set())
            if "raised" not in (tree.by_id[cid].get("flags") or [])
        ]
        return {"batch": b, "last": returned[-1] if returned else None}

    def _update_events(self, run: str, step: dict[str, Any], info: dict) -> list[dict[str, Any]]:
        try:
            params = self.store.chunk(run, "step", step["index"]).record.get("params") or []
        except AgentError:
            params = []
        groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for p in params:
            if isinstance(p, dict):
                groups.setdefault((p.get("optimizer") or 0, p.get("group") or 0), []).append(p)
        hyper = {
            (o.get("index", i), g): group
            for i, o in enumerate(step.get("optimizers") or [])
            for g, group in enumerate(o.get("groups") or [])
        }
        classes = {
            o.get("index", i): o.get("cls") for i, o in enumerate(step.get("optimizers") or [])
        }
        events = []
        for (opt, group), members in sorted(groups.items()):
            ranked = sorted(members, key=lambda p: -_ratio(p))
            events.append(
                _event(
                    "optimizer",
                    "update",
                    info,
                    step=step["index"],
                    name=f"{classes.get(opt) or 'optimizer'} group {group}",
                    optimizer=opt,
                    param_group=group,
                    lr=(hyper.get((opt, group)) or {}).get("lr"),
                    n_params=len(members),
                    top=[
                        {
                            "name": p.get("name"),
                            "ratio": (p.get("norms") or {}).get("ratio"),
                            "update": (p.get("norms") or {}).get("update"),
                            "w": (p.get("norms") or {}).get("w"),
                        }
                        for p in ranked[:TOP_PARAMS]
                    ],
                )
            )
        return events


# -- building events ------------------------------------------------------------------------


def _event(phase: str, kind: str, info: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "seq": -1,
        "phase": phase,
        "kind": kind,
        "batch": info.get("index"),
        "step": info.get("step"),
        "micro": info.get("micro"),
        **fields,
    }


def _forward_calls(tree: CallTree, detail: str, owners: set[int]) -> list[int]:
    """The calls a forward pass shows, in the order they returned: every module and project
    function (``call``), or the leaf modules, project functions and attention owners
    (``layer``). Kinds and phases are read unchecked (``CallTree.scalar``): this scans
    every call of the batch, and a call is checked when its event is built from it."""
    kind = {cid: tree.scalar(cid, "kind") for cid in tree.order}
    forward = [
        cid
        for cid in tree.order
        if kind[cid] in ("module", "function") and tree.scalar(cid, "phase") == "forward"
    ]
    first_module = min((c for c in forward if kind[c] == "module"), default=None)
    if first_module is not None:
        forward = [c for c in forward if not _prepares_batch(tree, kind, c, first_module)]
    if detail == "layer":
        forward = [
            cid
            for cid in forward
            if kind[cid] == "function"
            or cid in owners
            or not any(kind[c] == "module" for c in tree.children.get(cid, []))
        ]
    return returned_order(tree, forward)


def _prepares_batch(tree: CallTree, kind: dict[int, Any], cid: int, first_module: int) -> bool:
    """A project function that ran before the batch's first module call and calls no module
    (a ``get_batch()`` or ``collate()`` of a script without a DataLoader): it built the
    batch, it is not a layer of the forward. Call ids follow the order calls began."""
    if cid > first_module or kind[cid] != "function":
        return False
    below = list(tree.children.get(cid, []))
    while below:
        child = below.pop()
        if kind[child] == "module":
            return False
        below.extend(tree.children.get(child, []))
    return True


def _layer_event(tree: CallTree, cid: int, phase: str, info: dict[str, Any]) -> dict[str, Any]:
    """A layer's event without its tensors' fields: ``_tensor_fields`` adds them when a page
    first holds the event, so a run of 20,000 layers decodes the entries a viewer shows, not
    all of them, before the first page goes out (the call's own fields are read unchecked:
    the gradients' piece checks every call)."""
    return _event(
        phase,
        "layer" if phase == "forward" else "grad",
        info,
        call=cid,
        name=tree.scalar(cid, "name"),
        cls=tree.scalar(cid, "cls"),
        depth=tree.scalar(cid, "depth"),
    )


def _tensor_fields(tree: CallTree, cid: int) -> dict[str, Any]:
    """What a layer event says of its call's first output and of its gradient (that of the
    output the gradient reached: ``CallTree.grad_output``)."""
    call = tree.by_id[cid]
    out = tree.first_output(call)
    grad = tree.grad_of(tree.grad_output(call))
    norm = ((grad or {}).get("stats") or {}).get("norm")
    return {
        "tensor": out.get("id") if out else None,
        "grad": grad.get("id") if grad else None,
        "shape": out.get("shape") if out else None,
        "absmean": ((out or {}).get("stats") or {}).get("absmean"),
        "grad_norm": norm,
        "flags": (call.get("flags") or [])
        + [
            f
            for f in stat_flags((out or {}).get("stats"), norm)
            if f not in (call.get("flags") or [])
        ],
    }


def batch_forward(
    chunk: Chunk, tree: CallTree, info: dict[str, Any], sample: int, detail: str
) -> list[dict[str, Any]]:
    """A training batch's events up to its loss: the batch, the followed sample's stages,
    the forward layers and the loss (see the module docstring)."""
    record = chunk.record
    events = [_event("data", "batch", info, name=f"batch {info['index']}", loss=info.get("loss"))]
    section_given = record.get("data")
    section: dict[str, Any] = section_given if isinstance(section_given, dict) else {}
    seen: set[int] = set()
    for cid in returned_order(tree, item_calls(tree, section, sample)):
        arg = stage_output(tree.by_id[cid], seen)
        if arg is not None:
            call = tree.by_id[cid]
            events.append(
                _event("data", "stage", info, call=cid, name=call.get("name"), cls=call.get("cls"))
            )
    owners = {
        a["call"]
        for a in record.get("attention") or []
        if isinstance(a, dict) and isinstance(a.get("call"), int)
    }
    events.extend(
        _layer_event(tree, cid, "forward", info) for cid in _forward_calls(tree, detail, owners)
    )
    loss_given = record.get("loss")
    loss: dict[str, Any] = loss_given if isinstance(loss_given, dict) else {}
    if loss.get("call") in tree.by_id:
        call = tree.by_id[loss["call"]]
        events.append(
            _event(
                "loss",
                "loss",
                info,
                call=loss["call"],
                name=call.get("name"),
                fn=loss.get("fn"),
                value=loss.get("value"),
                reduction=loss.get("reduction"),
            )
        )
    return events


def batch_backward(
    tree: CallTree,
    info: dict[str, Any],
    forward: list[dict[str, Any]],
    missing: list[str],
    give_way: Callable[[], None],
) -> list[dict[str, Any]]:
    """A training batch's gradient events, in the order the gradients arrived, for the
    ``forward`` events ``batch_forward`` made. Every call of the batch is checked here: one
    that cannot be read is named in ``missing`` (once per batch) and has no gradient event;
    the batch's other events still play."""
    layers = [e["call"] for e in forward if e["kind"] == "layer"]
    arrived = []
    problem: str | None = None
    for position, cid in enumerate(layers):
        if position % GIVE_WAY_EVERY == 0:
            give_way()
        try:
            # The gradient's id, read off the output's entry: its own entry waits for a page.
            grad = (tree.grad_output(tree.by_id[cid]) or {}).get("grad")
        except StoreError as e:
            problem = problem or str(e)
            continue
        if isinstance(grad, int):
            arrived.append((grad, -position, cid))
    for position, cid in enumerate(tree.order):  # the calls no event reads, checked too
        if position % GIVE_WAY_EVERY == 0:
            give_way()
        try:
            tree.by_id[cid]
        except StoreError as e:
            problem = problem or str(e)
    if problem is not None:
        missing.append(f"batch {info['index']} cannot be read whole: {problem}")
    return [_layer_event(tree, cid, "backward", info) for _, _, cid in sorted(arrived)]


def _batch_row(info: dict, start: int, count: int, note: str | None) -> dict[str, Any]:
    return {
        "batch": info.get("index"),
        "step": info.get("step"),
        "micro": info.get("micro"),
        "loss": info.get("loss"),
        "light": bool(info.get("light") or info.get("no_grad")),
        "start": start,
        "count": count,
        "note": note,
    }


def _batch_note(record: dict[str, Any], info: dict[str, Any]) -> str | None:
    """One sentence on what a training batch lacks (a crash mid-forward leaves no loss)."""
    calls = record.get("calls") or []
    calls = calls.unchecked if isinstance(calls, CallRecords) else calls  # each value guarded
    if not any(isinstance(c, dict) and c.get("phase") == "forward" for c in calls):
        return (
            f"batch {info['index']} has no forward calls: the script stopped before the model ran."
        )
    if not isinstance(record.get("loss"), dict) and info.get("loss") is None:
        # A loss with no loss function (``x.pow(2).mean()``) is still in the batch map.
        return f"batch {info['index']} stopped before its loss: no loss and no gradients to replay."
    return None


def crash_note(
    meta: dict[str, Any], index: dict[str, Any], stopped: dict[str, Any] | None
) -> str | None:
    """One sentence for a run whose script raised: the line of the user's code that raised,
    the exception, what Replay has of the batch it died in (``stopped``, from
    ``_stopped_batch``), then the exception's message: what to fix comes first, so a line
    cut short by a narrow terminal still says it."""
    error = str(meta.get("error") or "").strip()
    if meta.get("status") != "failed" or not error:
        return None
    kind, _, message = error.splitlines()[-1].strip().partition(": ")
    project = str(meta.get("project") or "")
    frames = re.findall(r'File "([^"]+)", line (\d+), in ', error)
    mine = [f for f in frames if project and f[0].startswith(project)] or frames
    where = f"{Path(mine[-1][0]).name}:{mine[-1][1]}" if mine else "the script"
    said = f" — {_clip(message, MAX_ERROR_CHARS)}" if message else ""
    if stopped is None:
        n = len(index.get("batches") or [])
        return f"{where} raised {kind}; replaying the {n} batch(es) recorded before it{said}"
    b = stopped["batch"]
    after = f", after {stopped['last']}" if stopped.get("last") else ", before any layer"
    return f"{where} raised {kind} in batch {b}'s forward{after}: no loss or gradients for it{said}"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _light_name(batches: list[int], info: dict) -> str:
    what = "without gradients" if info.get("no_grad") else "statistics only"
    span = f"{batches[0]}" if len(batches) == 1 else f"{batches[0]}–{batches[-1]}"
    return f"batch {span} ({what})"


def _outline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of one phase within one batch: ``[{phase, batch, start, count}]``."""
    runs: list[dict[str, Any]] = []
    for e in events:
        last = runs[-1] if runs else None
        if last and last["phase"] == e["phase"] and last["batch"] == e["batch"]:
            last["count"] += 1
        else:
            runs.append({"phase": e["phase"], "batch": e["batch"], "start": e["seq"], "count": 1})
    return runs


def _kept_samples(chunk: Chunk, tree: CallTree) -> int | None:
    """How many samples of the batch have values (from the model input), None if unknown."""
    given = model_input(chunk.record, tree)
    if given is None:
        return None
    value = given.get("value")
    if not value:
        return 0
    shape = given.get("shape") or []
    if value.get("kept") == "samples" and isinstance(value.get("count"), int):
        return value["count"]
    # Every sample was kept: a batch no bigger than --samples says no count.
    dim = given.get("batch_dim")
    if isinstance(dim, int) and 0 <= dim < len(shape):
        return int(shape[dim])
    return int(shape[0]) if shape else None


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _ratio(p: dict[str, Any]) -> float:
    ratio = (p.get("norms") or {}).get("ratio")
    return float(ratio) if isinstance(ratio, (int, float)) and np.isfinite(ratio) else -1.0
