"""The Embeddings view's agent method: PCA of every captured sample's representation at
one depth (across the run's training batches, coloured by class), or of an embedding
table's rows labelled by token. The projection is computed here, next to the data; the
reply carries at most ``max_points`` points, chosen by an even stride that it states."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tvis.agent import insight_views as iv
from tvis.agent.dispatch import rpc
from tvis.agent.insights.common import (
    InsightBase,
    loss_section,
    section_list,
    stamp,
    token,
    training_batches,
)
from tvis.agent.insights.loss_arrays import LossArrays
from tvis.agent.lookups import Lookups
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError
from tvis.store.lru import LRU

# Points in one PCA reply: 4,000 points at 16 bytes each (x, y, label, sample) is 64 KiB,
# a view's budget; a terminal scatter shows far fewer distinct dots anyway.
MAX_POINTS = 4000


class EmbeddingsAPI(InsightBase):
    """``embeddings``; ``catalog`` is ``InsightsAPI.insights``: the layers and tables a
    run holds."""

    def __init__(
        self, lookups: Lookups, run_views: LRU, catalog: Callable[[str], dict[str, Any]]
    ) -> None:
        super().__init__(lookups, run_views)
        self.catalog = catalog

    @rpc
    def embeddings(
        self,
        run: str,
        layer: str | None = None,
        table: str | None = None,
        step: int | None = None,
        max_points: int = 2000,
    ) -> dict[str, Any]:
        """PCA of every captured sample's representation at ``layer`` (across all training
        batches, coloured by class), or with ``table``, of an ``nn.Embedding``'s rows at a
        step (the last by default), labelled with the vocabulary."""
        if not 1 <= max_points <= MAX_POINTS:
            raise AgentError(f"max_points must be between 1 and {MAX_POINTS}.", BAD_REQUEST)
        found = self.catalog(run)
        if table is not None:
            return self._table_pca(run, found["tables"], table, step, max_points)
        layers = found["repr_layers"]
        if not layers:
            raise AgentError("this run recorded no per-sample representations.", NOT_FOUND)
        layer = layer if layer is not None else layers[-1]
        index = self.store.index(run)
        batches = tuple(training_batches(index))
        key = (str(self.store.run_path(run)), "repr", layer, batches, stamp(index))
        gathered = self.run_views.get(key, lambda: self._repr_pca(run, layer, batches))
        if gathered is None:
            raise AgentError(f"no representation of layer {layer!r} was recorded.", NOT_FOUND)
        keep = _stride(gathered["total"], max_points)
        classes = self.lookups.data_info(run).get("classes")
        vocab = self.lookups.data_info(run).get("vocab")
        labels = gathered["labels"]
        by_token = gathered["label_kind"] == "first target token"
        return {
            "kind": "repr",
            "layers": layers,
            "layer": layer,
            "points": gathered["points"][keep],
            "labels": labels[keep] if labels is not None else None,
            "label_kind": gathered["label_kind"],
            "label_names": _label_names(vocab if by_token else classes, labels),
            "batch": gathered["batch"][keep],
            "sample": gathered["sample"][keep],
            "explained": gathered["explained"],
            "total": gathered["total"],
            "sampling": _sampling(gathered["total"], keep),
            "batches": list(batches),
        }

    def _repr_pca(self, run: str, layer: str, batches: tuple[int, ...]) -> dict | None:
        """Every training batch's pooled representation of ``layer``, projected once."""
        rows, labels, where, kind = [], [], [], None
        for b in batches:
            chunk = self.store.chunk(run, "batch", b)
            entry = next(
                (r for r in section_list(chunk.record, "repr") if r.get("module") == layer), None
            )
            values = chunk.array(entry["tensor"]) if entry else None
            if values is None:
                continue
            values = np.asarray(values, dtype=np.float32).reshape(values.shape[0], -1)
            rows.append(values)
            n = values.shape[0]
            where.append(np.stack([np.full(n, b), np.arange(n)], axis=1).astype(np.int32))
            found, kind_here = _labels(chunk, n)
            kind = kind or kind_here
            labels.append(found if found is not None else np.full(n, -1, np.int32))
        if not rows or len({r.shape[1] for r in rows}) != 1:
            return None
        stacked = np.concatenate(labels)
        projected, ratio = iv.pca(np.concatenate(rows))
        located = np.concatenate(where)
        return {
            "points": projected,
            "explained": ratio,
            "labels": stacked if (stacked >= 0).any() else None,
            "label_kind": kind if (stacked >= 0).any() else None,
            "batch": located[:, 0].copy(),
            "sample": located[:, 1].copy(),
            "total": int(projected.shape[0]),
        }

    def _table_pca(self, run: str, tables: list, table: str, step: int | None, max_points: int):
        info = next((t for t in tables if table in (t.get("module"), t.get("param"))), None)
        param = info.get("param") if info else table
        steps = self.store.reader(run).step_ids()
        if not steps:
            raise AgentError("this run has no optimizer step with parameter values.", NOT_FOUND)
        step = steps[-1] if step is None else step
        chunk = self.store.chunk(run, "step", step)
        record = next((p for p in chunk.record.get("params") or [] if p.get("name") == param), None)
        if record is None or not isinstance(record.get("weight"), int):
            raise AgentError(f"step {step} has no weights of {param!r}.", NOT_FOUND)
        weight = self.lookups.values(chunk, chunk.tensor(record["weight"]))
        if weight.ndim != 2:
            raise AgentError(f"{param!r} is not a table of row vectors.", BAD_REQUEST)
        projected, ratio = iv.pca(weight)  # every stored row shapes the axes
        keep = _stride(weight.shape[0], max_points)
        rows = np.arange(weight.shape[0])[keep]
        vocab = self.lookups.data_info(run).get("vocab")
        full_rows = (info or {}).get("rows") or weight.shape[0]
        labelled = isinstance(vocab, list) and len(vocab) == full_rows
        return {
            "kind": "table",
            "table": (info or {}).get("module") or table,
            "param": param,
            "step": step,
            "points": projected[keep],
            "rows": rows.astype(np.int32),
            "tokens": [token(vocab, int(i)) for i in rows] if labelled else [str(i) for i in rows],
            "vocab": labelled,
            "explained": ratio,
            "total": int(full_rows),
            "stored_rows": int(weight.shape[0]),
            "sampling": _sampling(weight.shape[0], keep),
        }


def _labels(chunk, n: int) -> tuple[np.ndarray | None, str | None]:
    """Each sample's colour: its class (classification), or for a language model the
    target token at its first valid position (sequences mostly end alike, with an
    end-of-text token, but start differently)."""
    arrays = LossArrays(chunk, loss_section(chunk, required=False), n)
    if not arrays.per_token:
        target = arrays.values("target")
        if target is not None and target.shape[0] == n:
            return target.reshape(n, -1)[:, 0].astype(np.int32), "class"
        return None, None
    target, valid = arrays.by_sample("target"), arrays.by_sample("valid")
    if target is None or target.shape[0] != n:
        return None, None
    out = np.full(n, -1, np.int32)
    for i in range(n):
        real = np.flatnonzero(valid[i].reshape(-1)) if valid is not None else [0]
        if len(real):
            out[i] = int(target[i].reshape(-1)[real[0]])
    return out, "first target token"


def _label_names(names_list: Any, labels: np.ndarray | None) -> dict[str, str] | None:
    """Names of the labels that occur (class names or vocabulary strings), by label."""
    if labels is None or not isinstance(names_list, list):
        return None
    present = np.unique(labels[labels >= 0])
    return {str(int(i)): token(names_list, int(i)) for i in present}


def _stride(total: int, most: int) -> slice:
    """An even stride through ``total`` points leaving at most ``most``."""
    return slice(0, total, max(1, -(-total // most)))


def _sampling(total: int, keep: slice) -> str:
    step = keep.step or 1
    if step == 1:
        return f"all {total} points"
    return f"one point in {step} of {total}"
