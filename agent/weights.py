"""The Weights page's methods: a parameter's conv kernels as a filter × channel grid, and
a matrix with its rows labelled by token or class (see PROTOCOL.md).

Everything is cut down next to the data: a grid shows at most ``MAX_GRID`` kernels of at
most ``MAX_CELL``² values each, a matrix view at most what ``view`` allows, so a reply
is a few KiB whatever the layer's size (a 50k-token embedding table included).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent import views
from tvis.agent.decode import Vocabulary
from tvis.agent.dispatch import rpc
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError
from tvis.agent.store import RunStore
from tvis.agent.tensors import TensorsAPI
from tvis.store.reader import Chunk

# Filters and input channels shown per grid: 32 × 32 kernels of 8 × 8 float32 values is
# 256 KiB at most; the viewer asks for what fits its pane (16 × 16 of 3 × 3 is 9 KiB).
MAX_GRID = 32
# Kernel side shown per grid cell: a 7 × 7 stem kernel fits whole; larger ones are averaged.
MAX_CELL = 8
WHICH = ("weight", "grad", "update")


class WeightsAPI:
    """Weights-page methods over the runs of ``store``; a matrix is ``tensors.param``'s
    view of it, with labels."""

    def __init__(self, store: RunStore, tensors: TensorsAPI) -> None:
        self.store = store
        self.tensors = tensors

    def _param_record(self, run: str, step: int, name: str, which: str) -> tuple[Chunk, dict]:
        if which not in WHICH:
            raise AgentError("which must be 'weight', 'grad' or 'update'.", BAD_REQUEST)
        chunk = self.store.chunk(run, "step", step)
        record = next((p for p in chunk.record.get("params") or [] if p.get("name") == name), None)
        if record is None:
            raise AgentError(f"step {step} has no parameter {name!r}.", NOT_FOUND)
        if not isinstance(record.get(which), int):
            raise AgentError(
                f"parameter {name!r} has no recorded {which} at step {step}.", NOT_FOUND
            )
        return chunk, record

    @rpc
    def kernel_grid(
        self,
        run: str,
        step: int,
        name: str,
        which: str = "weight",
        filters: int = 16,
        channels: int = 16,
        first_filter: int = 0,
        cell: int = 3,
    ) -> dict[str, Any]:
        """A conv weight ``[out, in, kh, kw]`` as a grid of kernels: ``array`` float32
        ``[filters, channels, h, w]`` from ``first_filter`` on, each kernel block-mean
        averaged to at most ``cell`` × ``cell``; ``lo``/``hi`` span the whole grid so
        kernels compare on one scale."""
        if not (1 <= filters <= MAX_GRID and 1 <= channels <= MAX_GRID and 1 <= cell <= MAX_CELL):
            raise AgentError(
                f"filters and channels must be 1 to {MAX_GRID}, cell 1 to {MAX_CELL}.", BAD_REQUEST
            )
        chunk, record = self._param_record(run, step, name, which)
        entry = chunk.tensor(record[which])
        values = chunk.array(entry["id"])
        if values is None:
            raise AgentError(f"the {which} of {name!r} was not kept (statistics only).", NOT_FOUND)
        full = [int(n) for n in record.get("shape") or values.shape]
        values = _kept_kernels(values, full, name)
        out_ch, in_ch = values.shape[:2]
        start = min(max(first_filter, 0), max(out_ch - 1, 0))
        cut = values[start : start + filters, :channels]
        cells = [
            [views.block_mean(cut[f, c], cell, cell) for c in range(cut.shape[1])]
            for f in range(cut.shape[0])
        ]
        grid = np.asarray(cells, dtype=np.float32)
        lo, hi = views.finite_range(grid)
        return {
            "name": name,
            "which": which,
            "array": grid,
            "lo": lo,
            "hi": hi,
            "shape": full,
            "kept_filters": int(out_ch),
            "kept_channels": int(in_ch),
            "kept_note": _kept_note(values.shape, full),
            "first_filter": start,
            "filters": int(cut.shape[0]),
            "channels": int(cut.shape[1]),
            "kernel": list(grid.shape[2:]),
            "downsampled": list(grid.shape[2:]) != list(values.shape[2:]),
        }

    @rpc
    def matrix(
        self,
        run: str,
        step: int,
        name: str,
        which: str = "weight",
        window: list[int] | None = None,
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """``param``'s view of a parameter, plus ``row_labels``: the token (embedding
        table) or class (classifier head) of the first row of each shown row block, when
        the parameter has one row per vocabulary entry or class; ``row_starts``: those rows."""
        _, record = self._param_record(run, step, name, which)
        result = self.tensors.param(
            run, step, name, which=which, window=window, width=width, height=height
        )
        data = self.store.index(run).get("data") or {}
        shape = record.get("shape") or []
        r0, r1 = result["window"][0], result["window"][1]
        starts = r0 + views.block_starts(r1 - r0, result["array"].shape[0])
        result["row_starts"] = starts.tolist()
        labels = _row_labels(shape, data)
        result["row_labels"] = [labels(int(r)) for r in starts] if labels else None
        return result


def _kept_kernels(values: np.ndarray, full: list[int], name: str) -> np.ndarray:
    """The kernels a step kept of a conv weight, as ``[filters, channels, kh, kw]``: its
    leading filters (rows), or when even one filter was too big, the whole kernels of the
    first filter's flat prefix."""
    if len(full) != 4:
        raise AgentError(
            f"{name!r} has shape {full}, not a conv kernel [out, in, kh, kw].", BAD_REQUEST
        )
    if values.ndim == 4:
        return values
    per_kernel = full[2] * full[3]
    whole = min(values.size // max(per_kernel, 1), full[1])
    if whole < 1:
        raise AgentError(f"not one whole kernel of {name!r} was kept.", NOT_FOUND)
    return values.reshape(-1)[: whole * per_kernel].reshape(1, whole, full[2], full[3])


def _kept_note(kept: tuple, full: list[int]) -> str | None:
    """What part of the weight the grid can show, when a step kept only part of it."""
    if kept[0] >= full[0] and kept[1] >= full[1]:
        return None
    note = f"{kept[0]} of {full[0]} filters kept"
    if kept[1] < full[1]:
        note += f" ({kept[1]} of its {full[1]} input channels)"
    return note + "; raise --param-elems to keep more"


def _row_labels(shape: list, data: dict[str, Any]):
    """A row → label function when a parameter's rows are the vocabulary or the classes."""
    if len(shape) != 2:
        return None
    vocab = Vocabulary(data)
    if vocab.known and shape[0] == len(vocab.tokens):
        return vocab.token
    classes = data.get("classes")
    if isinstance(classes, list) and shape[0] == len(classes):
        return lambda r: str(classes[r])
    return None
