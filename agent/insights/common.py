"""What every insight view reads from a batch: its sections, the run's training batches,
labels for tokens, and the run-wide cache the views keep (no view logic here)."""

from __future__ import annotations

from typing import Any

from tvis.agent.lookups import Lookups
from tvis.agent.protocol import NOT_FOUND, AgentError
from tvis.store.lru import LRU
from tvis.store.reader import Chunk

# Run-wide views (confusion, PCA across batches) read every batch once; these many stay cached.
RUN_VIEW_CACHE = 16


class InsightBase:
    """The base of the insight services: each reads runs through ``lookups`` and keeps the
    views it computes over a whole run (confusion, PCA across batches) in ``run_views``,
    an LRU the services share (their keys differ)."""

    def __init__(self, lookups: Lookups, run_views: LRU) -> None:
        self.lookups = lookups
        self.store = lookups.store
        self.run_views = run_views


def names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def section_list(record: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = record.get(name)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def training_batches(index: dict[str, Any]) -> list[int]:
    return [
        b["index"]
        for b in index.get("batches") or []
        if isinstance(b, dict) and isinstance(b.get("index"), int) and not b.get("light")
    ]


def stamp(index: dict[str, Any]) -> int:
    """Changes when a run still being recorded gains a batch (keys run-wide caches)."""
    return len(index.get("batches") or [])


def loss_section(chunk: Chunk, required: bool = True) -> dict[str, Any]:
    loss = chunk.record.get("loss")
    if isinstance(loss, dict):
        return loss
    if required:
        raise AgentError(f"{chunk.what} has no recorded loss call.", NOT_FOUND)
    return {}


def token(vocab: Any, i: Any) -> str:
    if isinstance(vocab, list) and isinstance(i, int) and 0 <= i < len(vocab):
        return vocab[i]
    return f"<{i}>"


def class_name(classes: Any, i: Any) -> str | None:
    if isinstance(classes, list) and isinstance(i, int) and 0 <= i < len(classes):
        return classes[i]
    return None


def input_ids(chunk: Chunk, given: dict | None, sample: int) -> list[int] | None:
    """The token ids a language model received for ``sample``, when they were kept."""
    shape = (given or {}).get("shape") or []
    if (
        given is None
        or len(shape) != 2
        or not str(given.get("dtype", "")).startswith(("int", "uint"))
    ):
        return None
    values = chunk.array(given["id"])
    if values is None or sample >= values.shape[0]:
        return None
    return [int(v) for v in values[sample]]


def is_picture_batch(given: dict | None) -> bool:
    """The model input is a batch of pictures ([B, C, H, W] or [B, H, W, C])."""
    return given is not None and len(given.get("shape") or []) == 4
