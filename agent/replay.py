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
from collections.abc import Callable
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
# Layers read between two chances for a short request to pass (agent/traffic.py): a few
# milliseconds of work.
GIVE_WAY_EVERY = 256


class ReplayAPI:
    """``replay`` over the runs ``lookups`` reads; a build gives way to the short requests
    ``traffic`` counts. The event lists built are kept, keyed by run, sample, detail, the
    index's stamp and the groups opened."""

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
    ) -> dict[str, Any]:
        """One page of the run's events for followed ``sample``, with the outline of the
        whole recording (phase runs and batch starts) a scrubber draws. ``expand`` names
        light groups (by their first batch) whose forward calls become events."""
        if detail not in DETAILS:
            raise AgentError(f"detail must be one of {', '.join(DETAILS)}.", BAD_REQUEST)
        if sample < 0 or offset < 0 or limit < 0:
            raise AgentError("sample, offset and limit must be 0 or more.", BAD_REQUEST)
        if len(expand or []) > MAX_EXPANDED:
            raise AgentError(f"expand at most {MAX_EXPANDED} light groups.", BAD_REQUEST)
        opened = frozenset(expand or [])
        index = self.store.index(run)
        key = (str(self.store.run_path(run)), sample, detail, stamp(index), opened)
        whole = self._event_lists.get(key, lambda: self._build(run, index, sample, detail, opened))
        events = whole["events"]
        return {
            "total": len(events),
            "sample": sample,
            "detail": detail,
            "status": self.store.reader(run).status,
            "outline": whole["outline"],
            "batches": whole["batches"],
            "missing": whole["missing"],
            "events": [
                self._with_tensors(run, e) for e in events[offset : offset + min(limit, MAX_EVENTS)]
            ],
        }

    def _with_tensors(self, run: str, event: dict[str, Any]) -> dict[str, Any]:
        """``event`` with its tensor fields, added in place the first time it is sent (one
        ``update``: a reply encoded on another thread sees all of them or none)."""
        if event["kind"] in ("layer", "grad") and "flags" not in event:
            event.update(_tensor_fields(self.lookups.tree(run, event["batch"]), event["call"]))
        return event

    def _build(
        self, run: str, index: dict[str, Any], sample: int, detail: str, opened: frozenset[int]
    ) -> dict[str, Any]:
        events: list[dict[str, Any]] = []
        batches: list[dict[str, Any]] = []
        missing: list[str] = []
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
                continue
            light = None
            start = len(events)
            try:
                chunk = self.store.chunk(run, "batch", b)
                tree = self.lookups.tree(run, b)
                built = batch_events(chunk, tree, info, sample, detail, self.traffic.give_way)
                kept_here = _kept_samples(chunk, tree)
            except AgentError as e:
                missing.append(f"batch {b} cannot be read: {e.message}")
                continue
            except StoreError as e:  # a corrupt call or entry, met as the events read it
                missing.append(f"batch {b} cannot be read: {e}")
                continue
            events.extend(built)
            kept = _min(kept, kept_here)
            note = _batch_note(chunk.record, info)
            if note:
                missing.append(note)
            step = last_of_step.get(b)
            if step is not None and step in steps:
                self.traffic.give_way()
                events.extend(self._update_events(run, steps[step], info))
            batches.append(_batch_row(info, start, len(events) - start, note))
        for i, event in enumerate(events):
            event["seq"] = i
        stopped = self._stopped_batch(run, index)
        crash = crash_note(self.store.reader(run).meta, index, stopped)
        if crash and stopped:
            # The crash note says what the stopped batch lacks: one line, not two.
            missing = [m for m in missing if not m.startswith(f"batch {stopped['batch']} ")]
        missing[:0] = self._run_notes(run, index, kept, sample, crash)
        return {
            "events": events,
            "outline": _outline(events),
            "batches": batches,
            "missing": missing,
        }

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
    (``layer``)."""
    forward = [
        cid
        for cid in tree.order
        if tree.by_id[cid].get("phase") == "forward"
        and tree.by_id[cid].get("kind") in ("module", "function")
    ]
    first_module = min((c for c in forward if tree.by_id[c].get("kind") == "module"), default=None)
    if first_module is not None:
        forward = [c for c in forward if not _prepares_batch(tree, c, first_module)]
    if detail == "layer":
        forward = [
            cid
            for cid in forward
            if tree.by_id[cid].get("kind") == "function"
            or cid in owners
            or not any(tree.by_id[c].get("kind") == "module" for c in tree.children.get(cid, []))
        ]
    return returned_order(tree, forward)


def _prepares_batch(tree: CallTree, cid: int, first_module: int) -> bool:
    """A project function that ran before the batch's first module call and calls no module
    (a ``get_batch()`` or ``collate()`` of a script without a DataLoader): it built the
    batch, it is not a layer of the forward. Call ids follow the order calls began."""
    if cid > first_module or tree.by_id[cid].get("kind") != "function":
        return False
    below = list(tree.children.get(cid, []))
    while below:
        child = below.pop()
        if tree.by_id[child].get("kind") == "module":
            return False
        below.extend(tree.children.get(child, []))
    return True


def _layer_event(tree: CallTree, cid: int, phase: str, info: dict[str, Any]) -> dict[str, Any]:
    """A layer's event without its tensors' fields: ``_tensor_fields`` adds them when a page
    first holds the event, so a run of 20,000 layers decodes the entries a viewer shows, not
    all of them, before the first page goes out."""
    call = tree.by_id[cid]
    return _event(
        phase,
        "layer" if phase == "forward" else "grad",
        info,
        call=cid,
        name=call.get("name"),
        cls=call.get("cls"),
        depth=call.get("depth"),
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


def batch_events(
    chunk: Chunk,
    tree: CallTree,
    info: dict[str, Any],
    sample: int,
    detail: str,
    give_way: Callable[[], None],
) -> list[dict[str, Any]]:
    """The events of one training batch, data to backward (see the module docstring)."""
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
    forward = _forward_calls(tree, detail, owners)
    events.extend(_layer_event(tree, cid, "forward", info) for cid in forward)
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
    arrived = []
    for position, cid in enumerate(forward):
        if position % GIVE_WAY_EVERY == 0:
            give_way()
        # The gradient's id, read off the output's entry: its own entry waits for a page.
        grad = (tree.grad_output(tree.by_id[cid]) or {}).get("grad")
        if isinstance(grad, int):
            arrived.append((grad, -position, cid))
    events.extend(_layer_event(tree, cid, "backward", info) for _, _, cid in sorted(arrived))
    return events


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
