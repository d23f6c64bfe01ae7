"""The query API over a runs root: the services that answer the protocol's methods (see
PROTOCOL.md), each given what it reads in its constructor, composed here.

Each method is registered with ``@rpc`` (agent/dispatch.py); its type hints are its
parameter schema. Results are plain maps, lists, scalars and numpy arrays; views are
computed next to the data, so a reply holds what one screen shows rather than whole
tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tvis.agent.calls import CallsAPI
from tvis.agent.calltree import CallTree
from tvis.agent.dispatch import METHODS
from tvis.agent.insights import (
    AttentionAPI,
    EmbeddingsAPI,
    GradcamAPI,
    InsightsAPI,
    LossAPI,
    PipelineAPI,
)
from tvis.agent.insights.common import RUN_VIEW_CACHE
from tvis.agent.layer_api import LayerViewsAPI
from tvis.agent.lookups import Lookups
from tvis.agent.ranks import RanksAPI
from tvis.agent.replay import ReplayAPI
from tvis.agent.runs import RunsAPI
from tvis.agent.store import RunStore
from tvis.agent.tensors import TensorsAPI
from tvis.agent.traffic import Traffic
from tvis.agent.watch import WatchAPI
from tvis.agent.weights import WeightsAPI
from tvis.store.lru import LRU


class AgentAPI:
    """Answers the protocol's methods for the runs under ``root``; safe to share between
    threads. One service per page or subject, each with its dependencies explicit:

    - ``RunsAPI`` (agent/runs.py): hello, the runs, a run, a step
    - ``CallsAPI`` (agent/calls.py): a batch's calls, layers table, timeline, samples, source
    - ``TensorsAPI`` (agent/tensors.py): one tensor's entry, views, values and bytes
    - ``ReplayAPI`` (agent/replay.py) and ``LayerViewsAPI`` (agent/layer_api.py): Replay
    - ``InsightsAPI`` and its views (agent/insights/), ``WeightsAPI``, ``RanksAPI``,
      ``WatchAPI``

    A request's method runs on the service whose class defines it (``receiver``);
    ``api.<method>(...)`` calls the same bound method directly."""

    def __init__(self, root: Path | str) -> None:
        self.store = RunStore(root)
        self.traffic = Traffic()
        self.lookups = Lookups(self.store)
        run_views = LRU(RUN_VIEW_CACHE)
        ranks = RanksAPI(self.store)
        tensors = TensorsAPI(self.lookups)
        catalog = InsightsAPI(self.lookups, run_views)
        self.services: tuple[object, ...] = (
            RunsAPI(self.store, ranks),
            ranks,
            CallsAPI(self.lookups),
            tensors,
            ReplayAPI(self.lookups, self.traffic),
            LayerViewsAPI(self.lookups),
            catalog,
            AttentionAPI(self.lookups, run_views),
            GradcamAPI(self.lookups, run_views),
            EmbeddingsAPI(self.lookups, run_views, catalog.insights),
            LossAPI(self.lookups, run_views),
            PipelineAPI(self.lookups, run_views),
            WeightsAPI(self.store, tensors),
            WatchAPI(self.store),
        )
        # The registered function of each method → the service that defines it.
        self._owners: dict[Callable[..., Any], object] = {}
        self._by_name: dict[str, object] = {}
        for service in self.services:
            for name, func in METHODS.items():
                if getattr(type(service), name, None) is func:
                    if name in self._by_name:
                        raise RuntimeError(f"two services answer {name!r}.")
                    self._owners[func] = service
                    self._by_name[name] = service

    def receiver(self, func: Callable[..., Any]) -> object:
        """What ``func`` (a registered method) is called on: the service whose class
        defines it, or the API itself for a method registered outside any service."""
        return self._owners.get(func, self)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # Only reached for names not set in __init__: a protocol method, by name.
        service = self.__dict__.get("_by_name", {}).get(name)
        if service is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(service, name)

    # -- a lookup the tests reach for ---------------------------------------------------

    def _tree(self, run: str, batch: int) -> CallTree:
        return self.lookups.tree(run, batch)
