"""The Attention view's agent methods: one layer's token × token map (a head or the mean
of the heads) or the rollout through every layer, a grid of every head of a layer ordered
by entropy, and where one token looks, laid over the input picture for vision models."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent import insight_views as iv
from tvis.agent import views
from tvis.agent.dispatch import rpc
from tvis.agent.insights.common import (
    InsightBase,
    input_ids,
    is_picture_batch,
    section_list,
    token,
)
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError, require_non_negative
from tvis.agent.samples import model_input
from tvis.store.reader import Chunk

# Side of one attention map in a reply: 128 × 128 float32 is 64 KiB, a view's budget; a
# terminal shows far fewer cells, and longer sequences are block-averaged (and say so).
MAX_MAP_SIDE = 128
# Values in a heads grid (heads × side × side): 16 heads of 32 × 32 fit the 64 KiB budget.
MAX_GRID_VALUES = 16384
# Token labels sent with a map: one per token up to this many (a label is a few bytes).
MAX_LABELS = 1024


class AttentionAPI(InsightBase):
    """``attention``, ``attention_heads`` and ``attention_overlay``."""

    @rpc
    def attention(
        self,
        run: str,
        batch: int,
        layer: int = 0,
        head: int | None = None,
        sample: int = 0,
        rollout: bool = False,
        width: int = 128,
        height: int = 128,
    ) -> dict[str, Any]:
        """One layer's attention map for a sample (one head, or the mean of the heads), or
        the rollout through every layer, with token labels on both axes."""
        require_non_negative(sample=sample)
        _check_side(width, height)
        chunk, found = self._attention_layers(run, batch, layer)
        square = self._square(chunk, found, layer, sample, head, rollout)
        small = views.block_mean(square, height, width)
        labels = self._token_labels(run, chunk, batch, sample, square.shape[-1])
        return {
            "layers": [a.get("module") for a in found],
            "layer": layer,
            "module": found[layer].get("module"),
            "heads": found[layer].get("heads"),
            "head": head,
            "sample": sample,
            "rollout": rollout,
            "map": small,
            "shape": list(square.shape),
            "downsampled": small.shape != square.shape,
            "causal": _causal(square),
            "recomputed": _recomputed(found if rollout else found[layer : layer + 1]),
            **labels,
        }

    @rpc
    def attention_heads(
        self, run: str, batch: int, layer: int = 0, sample: int = 0, side: int = 24
    ) -> dict[str, Any]:
        """Every head of one layer as a small map, with each head's mean row entropy
        (nats; low = focused), and the heads' order from most to least focused."""
        require_non_negative(sample=sample)
        chunk, found = self._attention_layers(run, batch, layer)
        one = self._sample_maps(chunk, found[layer], sample)
        heads = one if one.ndim == 3 else one[None]
        if not 1 <= side or heads.shape[0] * side * side > MAX_GRID_VALUES:
            most = int((MAX_GRID_VALUES // heads.shape[0]) ** 0.5)
            raise AgentError(f"side must be between 1 and {most} for this layer.", BAD_REQUEST)
        entropy = np.array([_row_entropy(h) for h in heads], dtype=np.float32)
        return {
            "layer": layer,
            "module": found[layer].get("module"),
            "sample": sample,
            "shape": list(heads.shape[1:]),
            "maps": np.stack([views.block_mean(h, side, side) for h in heads]),
            "entropy": entropy,
            "order": np.argsort(entropy, kind="stable").astype(np.int32),
            "causal": _causal(heads.mean(axis=0)),
            "recomputed": _recomputed(found[layer : layer + 1]),
        }

    @rpc
    def attention_overlay(
        self,
        run: str,
        batch: int,
        layer: int = 0,
        head: int | None = None,
        sample: int = 0,
        query: int = 0,
        rollout: bool = False,
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """Where token ``query`` ([CLS] by default) looks among a vision model's patches:
        its row of the map on the patch grid, scaled to [0, 1] and resized onto the
        input picture, with the picture."""
        require_non_negative(sample=sample)
        views.check_size(width, height)
        chunk, found = self._attention_layers(run, batch, layer)
        square = self._square(chunk, found, layer, sample, head, rollout)
        given = model_input(chunk.record, self.lookups.tree(run, batch))
        grid = iv.patch_grid(square.shape[-1]) if is_picture_batch(given) else None
        if grid is None:
            raise AgentError(
                "this attention is not over a picture's patches; see the token map instead.",
                NOT_FOUND,
            )
        if not 0 <= query < square.shape[0]:
            raise AgentError(f"query must be between 0 and {square.shape[0] - 1}.", BAD_REQUEST)
        row = square[query, grid["offset"] :].reshape(grid["h"], grid["w"])
        assert given is not None  # a patch grid is found over a batch of pictures only
        values = chunk.array(given["id"])
        if values is None or sample >= values.shape[0]:
            raise AgentError(f"the input picture of sample {sample} was not kept.", NOT_FOUND)
        picture = views.picture(values[sample], self.lookups.normalize(run), width, height)
        peak = float(row.max()) if row.size else 0.0
        out_h, out_w = picture["array"].shape[:2]
        return {
            "layer": layer,
            "module": found[layer].get("module"),
            "head": head,
            "sample": sample,
            "rollout": rollout,
            "query": query,
            "query_label": _patch_labels(square.shape[-1], grid)[query],
            "grid": grid,
            "patches": row.astype(np.float32),
            "map": iv.resize(row / peak if peak > 0 else row, out_h, out_w),
            "peak": peak,
            "image": picture["array"],
            "recomputed": _recomputed(found if rollout else found[layer : layer + 1]),
        }

    # -- shared reading ------------------------------------------------------------------

    def _attention_layers(self, run: str, batch: int, layer: int) -> tuple[Chunk, list[dict]]:
        chunk = self.store.chunk(run, "batch", batch)
        found = section_list(chunk.record, "attention")
        if not found:
            raise AgentError(f"batch {batch} has no attention weights.", NOT_FOUND)
        if not 0 <= layer < len(found):
            raise AgentError(f"layer must be between 0 and {len(found) - 1}.", BAD_REQUEST)
        return chunk, found

    def _square(
        self,
        chunk: Chunk,
        found: list[dict],
        layer: int,
        sample: int,
        head: int | None,
        rollout: bool,
    ) -> np.ndarray:
        if not rollout:
            return self._attention_map(chunk, found[layer], sample, head)
        maps = [self._attention_map(chunk, a, sample, None) for a in found]
        if len({m.shape for m in maps}) != 1 or maps[0].shape[0] != maps[0].shape[1]:
            raise AgentError("rollout needs square maps of one size in every layer.", BAD_REQUEST)
        return iv.rollout(maps)

    def _sample_maps(self, chunk: Chunk, found: dict, sample: int) -> np.ndarray:
        values = self.lookups.values(chunk, chunk.tensor(found["tensor"]))
        return views.take_sample(values, 0, sample).astype(np.float64)

    def _attention_map(self, chunk: Chunk, found: dict, sample: int, head: int | None):
        one = self._sample_maps(chunk, found, sample)
        if one.ndim == 2:
            return one
        if head is None:
            return one.mean(axis=0)
        if not 0 <= head < one.shape[0]:
            raise AgentError(f"head must be between 0 and {one.shape[0] - 1}.", BAD_REQUEST)
        return one[head]

    def _token_labels(self, run: str, chunk: Chunk, batch: int, sample: int, n: int) -> dict:
        """``tokens``: a label per position (decoded tokens, or [CLS] and patch numbers for
        a picture's patches; null beyond ``MAX_LABELS``), and ``grid`` for pictures."""
        given = model_input(chunk.record, self.lookups.tree(run, batch))
        if is_picture_batch(given):
            grid = iv.patch_grid(n)
            labels = _patch_labels(n, grid) if grid and n <= MAX_LABELS else None
            return {"grid": grid, "tokens": labels}
        ids = input_ids(chunk, given, sample)
        vocab = self.lookups.data_info(run).get("vocab")
        if ids is not None and len(ids) == n and n <= MAX_LABELS:
            return {"grid": None, "tokens": [token(vocab, i) for i in ids]}
        return {"grid": None, "tokens": None}


def _check_side(width: int, height: int) -> None:
    if not (1 <= width <= MAX_MAP_SIDE and 1 <= height <= MAX_MAP_SIDE):
        raise AgentError(f"width and height must be between 1 and {MAX_MAP_SIDE}.", BAD_REQUEST)


def _patch_labels(n: int, grid: dict[str, int]) -> list[str]:
    lead = ["[CLS]"] * grid["offset"]
    return lead + [f"p{i}" for i in range(n - grid["offset"])]


def _recomputed(layers: list[dict]) -> str | None:
    """How the weights shown were had when tvis computed them (fused attention exposes
    none): "recomputed from q·k"; None when they are the model's own softmax output."""
    return next((str(a["recomputed"]) for a in layers if a.get("recomputed")), None)


def _causal(square: np.ndarray) -> bool:
    """Every weight above the diagonal is exactly zero: a causal mask was applied."""
    n = square.shape[-1]
    return bool(square.shape[-2] == n > 1 and not np.triu(square, k=1).any())


def _row_entropy(attention: np.ndarray) -> float:
    """Mean entropy (nats) of the rows of one head's map."""
    p = np.clip(attention, 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(p), 0.0)
    return float(terms.sum(axis=-1).mean())
