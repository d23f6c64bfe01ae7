"""The agent API's methods on runs as a whole: the handshake, the list of runs under the
root, one run's index, and one optimizer step's record (see PROTOCOL.md)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from tvis import __version__
from tvis.agent.dispatch import rpc
from tvis.agent.protocol import (
    HEARTBEAT_S,
    PROTOCOL_VERSION,
    VERSION_MISMATCH,
    AgentError,
    mismatch_message,
)
from tvis.agent.ranks import RanksAPI
from tvis.agent.store import RunStore
from tvis.store.reader import RunReader, StoreError, leads_outside
from tvis.store.watch import describe as describe_watch


class RunsAPI:
    """``hello``, ``runs``, ``run`` and ``step`` over the runs of ``store``; a run's index
    lists the other ranks of its recording, which ``ranks`` finds."""

    def __init__(self, store: RunStore, ranks: RanksAPI) -> None:
        self.store = store
        self.ranks = ranks

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
            "ranks": self.ranks.rank_siblings(run),
        }

    @rpc
    def step(self, run: str, step: int) -> dict[str, Any]:
        """An optimizer step: its record and every parameter's record with norms."""
        record = self.store.chunk(run, "step", step).record
        return {"step": record.get("step") or {}, "params": record.get("params") or []}
