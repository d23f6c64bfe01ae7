"""What every service of the agent API looks up in a run: a batch's or step's chunk, a
batch's call tree (built once and kept with the chunk), a call, a tensor's entry and its
stored values, and the run's ``data`` info. One object, shared by the services and given
to each in its constructor (agent/api.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent.calltree import CallTree
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError
from tvis.agent.store import RunStore
from tvis.store.reader import Chunk


class Lookups:
    """Lookups over ``store``; safe to share between threads (the store is)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def chunk(self, run: str, batch: int | None, step: int | None) -> Chunk:
        """The chunk of exactly one of ``batch`` and ``step``."""
        if batch is not None and step is None:
            return self.store.chunk(run, "batch", batch)
        if step is not None and batch is None:
            return self.store.chunk(run, "step", step)
        raise AgentError("give exactly one of 'batch' and 'step'.", BAD_REQUEST)

    def tree(self, run: str, batch: int) -> CallTree:
        chunk = self.store.chunk(run, "batch", batch)
        return self.store.derived(chunk, "tree", lambda: CallTree(chunk.record, chunk.tensors))

    def call(self, tree: CallTree, call: int) -> dict[str, Any]:
        if call not in tree.by_id:
            raise AgentError(f"this batch has no call {call}.", NOT_FOUND)
        return tree.by_id[call]

    def entry(self, chunk: Chunk, tensor: int, grad: bool) -> dict[str, Any]:
        """Tensor ``tensor``'s entry, or with ``grad`` its gradient's."""
        entry = chunk.tensor(tensor)
        if not grad:
            return entry
        grad_id = entry.get("grad")
        if grad_id is None:
            raise AgentError(f"tensor {tensor} has no recorded gradient.", NOT_FOUND)
        return chunk.tensor(grad_id)

    def values(self, chunk: Chunk, entry: dict[str, Any]) -> np.ndarray:
        values = chunk.array(entry["id"])
        if values is None:
            raise AgentError(
                f"tensor {entry['id']} of {chunk.what} has stats only; its values were not kept.",
                NOT_FOUND,
            )
        return values

    def data_info(self, run: str) -> dict[str, Any]:
        """The run's ``data`` info: classes, vocab, normalize, tokenizer, insights."""
        data = self.store.index(run).get("data")
        return data if isinstance(data, dict) else {}

    def normalize(self, run: str) -> Any:
        """The mean/std the run's input pictures were normalized with, if recorded."""
        return self.data_info(run).get("normalize")
