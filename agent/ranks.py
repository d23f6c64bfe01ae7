"""The ranks of a multi-process recording compared: where ranks that should agree do not.

A group folder holds one run per rank (tvis/store/format.py). Everything here is read
from the ranks' run indexes and step indexes (never a batch's call tree or values), so a
comparison costs a few small files per rank, and every reply is bounded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tvis.agent.dispatch import rpc
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError
from tvis.agent.store import RunStore
from tvis.store.reader import StoreError, describe_group, is_group, rank_runs

MAX_RANKS = 64
"""Ranks compared in one reply: a screen shows a column per rank, and 64 runs' indexes
are still a few MB to read; larger jobs are compared over their first 64 ranks."""

MAX_STEPS = 256
"""Steps listed per reply: `tvis run` records a handful; 256 bounds a long recording."""

MAX_NAMES = 50
"""Parameter names listed per rank (unused ones): enough to recognise the pattern."""

MAX_PARAM_PAGE = 500
"""Rows of the per-parameter comparison per reply (one screenful is tens)."""

MAX_ERROR = 300
"""Characters of a rank's error line: the sentence, not a page of backend diagnostics."""

PHASES = ("data", "forward", "loss", "backward", "optimizer")

# Substrings of the error a rank meets when a peer process died under it (gloo, NCCL):
# such a rank failed because of another, which is the one to look at.
_PEER_ERRORS = ("closed by peer", "remote worker", "connection reset", "NCCL communicator")


class RanksAPI:
    """Methods over the group a rank's run belongs to, among the runs of ``store``."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def _group(self, run: str) -> tuple[Path, list[tuple[int, str]]]:
        """The group folder of ``run`` and its ranks as (rank, run name), rank 0 first."""
        path = self.store.run_path(run)
        group = path.parent
        if not is_group(group) or not self.store.inside(group):
            raise AgentError(
                f"run {run!r} is not one rank of a multi-process recording.", NOT_FOUND
            )
        ranks = []
        for rank_path in rank_runs(group):
            if self.store.inside(rank_path):
                number = int(rank_path.name.removeprefix("rank"))
                ranks.append((number, self.store.name_of(rank_path)))
        return group, ranks

    def rank_siblings(self, run: str) -> list[dict[str, Any]]:
        """``[{rank, run}]`` of every rank in ``run``'s group; ``[]`` for a single process."""
        try:
            _, ranks = self._group(run)
        except AgentError:
            return []
        return [{"rank": rank, "run": name} for rank, name in ranks]

    def _rank_index(self, name: str) -> dict[str, Any]:
        try:
            return self.store.index(name)
        except (StoreError, AgentError):
            return {}

    @rpc
    def ranks(self, run: str) -> dict[str, Any]:
        """The ranks of ``run``'s group side by side: status, loss per step, time per
        phase, batches seen by several ranks, gradients that differ, unused parameters."""
        group, all_ranks = self._group(run)
        ranks = all_ranks[:MAX_RANKS]
        indexes = [self._rank_index(name) for _, name in ranks]
        rows = [
            self._rank_row(rank, name, idx)
            for (rank, name), idx in zip(ranks, indexes, strict=True)
        ]
        grads = self._compare_grads(ranks, indexes)
        return {
            "group": self.store.name_of(group),
            **{k: describe_group(group).get(k) for k in ("world_size", "launcher", "full_ranks")},
            "total": len(all_ranks),
            "ranks": rows,
            "first_failure": _first_failure(rows),
            "loss": _losses(indexes),
            "phases": [_phase_means(idx) for idx in indexes],
            "straggler": _straggler(ranks, indexes),
            "same_batches": _same_batches(ranks, indexes),
            "grads": grads["summary"],
            "unused": grads["unused"],
        }

    @rpc
    def rank_params(self, run: str, step: int, offset: int = 0, limit: int = 200) -> dict[str, Any]:
        """Per parameter at ``step``: each rank's gradient norm and whether the gradients
        are bit-identical across ranks (by digest); ``null`` where a rank has none."""
        if offset < 0 or limit < 0:
            raise AgentError("offset and limit must be 0 or more.", BAD_REQUEST)
        _, ranks = self._group(run)
        ranks = ranks[:MAX_RANKS]
        params = [self._step_params(name, step) for _, name in ranks]
        if not any(params):
            raise AgentError(f"no rank of this recording has step {step} (yet).", NOT_FOUND)
        names = _union_names(params)
        numbers = [rank for rank, _ in ranks]
        rows = [_param_row(name, params, numbers) for name in names]
        return {
            "step": step,
            "ranks": [rank for rank, _ in ranks],
            "total": len(rows),
            "rows": rows[offset : offset + min(limit, MAX_PARAM_PAGE)],
        }

    def _step_params(self, name: str, step: int) -> dict[str, dict[str, Any]]:
        """Parameter name -> {grad norm, grad digest, has grad} of one rank's step."""
        try:
            chunk = self.store.chunk(name, "step", step)
            record = chunk.record
        except (StoreError, AgentError):
            return {}
        out = {}
        for p in record.get("params") or []:
            grad = chunk.tensors.get(p.get("grad"))
            out[p.get("name")] = {
                "norm": (p.get("norms") or {}).get("grad"),
                "digest": grad.get("digest") if grad else None,
                # False when this rank's own backward never reached the parameter, even if
                # the all-reduce then gave it the other ranks' gradient.
                "has_grad": grad is not None and p.get("local_grad", True) is not False,
            }
        return out

    def _compare_grads(self, ranks: list[tuple[int, str]], indexes: list[dict]) -> dict:
        """The first parameter (in step, then parameter order) whose gradient differs
        across ranks, and the parameters each rank never received a gradient for."""
        steps = min((len(idx.get("steps") or []) for idx in indexes), default=0)
        unused: dict[int, list[str]] = {rank: [] for rank, _ in ranks}
        first, differ, compared, params_seen = None, 0, 0, 0
        for step in range(min(steps, MAX_STEPS)):
            params = [self._step_params(name, step) for _, name in ranks]
            names = _union_names(params)
            params_seen = max(params_seen, len(names))
            for pname in names:
                row = _param_row(pname, params, [rank for rank, _ in ranks])
                for rank, norm in zip(row["ranks"], row["has_grad"], strict=True):
                    if not norm and pname not in unused[rank]:
                        unused[rank].append(pname)
                if row["same"] is None:
                    continue
                compared += 1
                if not row["same"]:
                    differ += 1
                    if first is None:
                        first = {"step": step, "name": pname, "norms": row["norms"]}
                        first["digests"] = row["digests"]
        return {
            "summary": {
                "steps": min(steps, MAX_STEPS),
                "params": params_seen,
                "compared": compared,
                "differ": differ,
                "first": first,
            },
            "unused": [
                {"rank": rank, "count": len(names), "params": names[:MAX_NAMES]}
                for rank, names in unused.items()
                if names
            ],
        }

    def _rank_row(self, rank: int, name: str, index: dict) -> dict[str, Any]:
        try:
            reader = self.store.reader(name)
        except (StoreError, AgentError) as e:
            return {"rank": rank, "run": name, "status": "unreadable", "error": str(e)}
        meta = reader.meta
        error = meta.get("error") or ""
        return {
            "rank": rank,
            "run": name,
            "status": reader.status,
            "full": bool(meta.get("full", True)),
            "host": meta.get("host"),
            "pid": meta.get("pid"),
            "steps": len(index.get("steps") or []),
            "batches": len([b for b in index.get("batches") or [] if not b.get("light")]),
            "ended": meta.get("ended"),
            "error": error.strip().splitlines()[-1][:MAX_ERROR] if error.strip() else None,
            "peer_failure": any(s.lower() in error.lower() for s in _PEER_ERRORS),
        }


def _union_names(params: list[dict[str, dict]]) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    for per_rank in params:
        for name in per_rank:
            if name not in seen:
                seen.add(name)
                names.append(name)
    return names


def _param_row(name: str, params: list[dict[str, dict]], ranks: list[int]) -> dict[str, Any]:
    """One parameter across ``ranks``; ``same`` is None when fewer than two ranks have its
    gradient's digest (nothing to compare)."""
    got = [p.get(name) for p in params]
    digests = [g["digest"] if g else None for g in got]
    present = [d for d in digests if d is not None]
    return {
        "name": name,
        "ranks": ranks,
        "norms": [g["norm"] if g else None for g in got],
        "digests": digests,
        "has_grad": [bool(g and g["has_grad"]) for g in got],
        "same": (len(set(present)) == 1) if len(present) >= 2 else None,
    }


def _losses(indexes: list[dict]) -> list[dict[str, Any]]:
    steps = max((len(idx.get("steps") or []) for idx in indexes), default=0)
    rows = []
    for step in range(min(steps, MAX_STEPS)):
        losses = []
        for idx in indexes:
            maps = idx.get("steps") or []
            losses.append(maps[step].get("loss") if step < len(maps) else None)
        rows.append({"step": step, "losses": losses})
    return rows


def _phase_means(index: dict) -> dict[str, Any]:
    """Mean milliseconds per training batch in each phase, and their sum."""
    train = [b for b in index.get("batches") or [] if not b.get("light")]
    means = {}
    for phase in PHASES:
        found = [(b.get("phase_ms") or {}).get(phase) for b in train]
        values = [v for v in found if isinstance(v, (int, float))]
        means[phase] = sum(values) / len(values) if values else None
    means["total"] = sum(v for v in means.values() if v is not None) if train else None
    means["batches"] = len(train)
    return means


def _straggler(ranks: list[tuple[int, str]], indexes: list[dict]) -> dict[str, Any] | None:
    """The rank with the longest mean batch, and how much longer than the fastest."""
    totals = [
        (_phase_means(idx)["total"], rank) for (rank, _), idx in zip(ranks, indexes, strict=True)
    ]
    totals = [(t, r) for t, r in totals if t]
    if len(totals) < 2:
        return None
    slow, fast = max(totals), min(totals)
    return {"rank": slow[1], "ms": slow[0], "fastest": fast[1], "ratio": slow[0] / fast[0]}


def _same_batches(ranks: list[tuple[int, str]], indexes: list[dict]) -> dict[str, Any]:
    """Training batches whose collated contents were bit-identical on several ranks (a
    missing DistributedSampler, or one every rank seeds alike)."""
    by_position: dict[tuple, dict[str, list[int]]] = {}
    compared = 0
    for (rank, _), idx in zip(ranks, indexes, strict=True):
        train = [b for b in idx.get("batches") or [] if not b.get("light")]
        for position, b in enumerate(train[:MAX_STEPS]):
            if b.get("digest"):
                compared += 1
                by_position.setdefault((position, b.get("step")), {}).setdefault(
                    b["digest"], []
                ).append(rank)
    rows = []
    for (position, step), groups in sorted(by_position.items(), key=lambda kv: kv[0][0]):
        shared = [sorted(rs) for rs in groups.values() if len(rs) > 1]
        if shared:
            rows.append({"batch": position, "step": step, "ranks": shared})
    return {"compared": compared, "batches": rows[:MAX_STEPS]}


def _first_failure(rows: list[dict[str, Any]]) -> int | None:
    """The rank that failed first on its own (not because a peer died under it); when
    every failure is a lost peer, the rank that left the group first (even complete)."""
    failed = [r for r in rows if r.get("status") in ("failed", "interrupted", "incomplete")]
    own = [r for r in failed if not r.get("peer_failure")]
    if failed and not own:
        own = [r for r in rows if not r.get("peer_failure") and r.get("ended")]
    if not own:
        return None
    own.sort(key=lambda r: (r.get("status") == "incomplete", r.get("ended") or float("inf")))
    return own[0]["rank"]
