"""The insight methods of the agent API, one module per view (see PROTOCOL.md):
``pipeline`` (a sample's way into the model), ``loss`` (per-sample and per-token tables,
the loss in detail), ``gradcam``, ``attention`` (with rollout) and ``embeddings`` (PCA).

Each reads what ``tvis/record`` wrote for a batch (the ``data``, ``tokens``, ``loss``,
``gradcam``, ``attention`` and ``repr`` sections, the run's ``data`` info) and replies
with what one screen shows: pictures shrunk to the size asked for, maps downsampled,
points capped, tables paged. Each view is a service of its own, composed by ``AgentAPI``
(agent/api.py); ``InsightsAPI`` here says which of them a run feeds.
"""

from __future__ import annotations

from typing import Any

from tvis.agent.dispatch import rpc
from tvis.agent.insights.attention import AttentionAPI
from tvis.agent.insights.common import InsightBase, names, section_list, training_batches
from tvis.agent.insights.embeddings import EmbeddingsAPI
from tvis.agent.insights.gradcam import GradcamAPI
from tvis.agent.insights.loss import LossAPI
from tvis.agent.insights.pipeline import PipelineAPI

__all__ = ["AttentionAPI", "EmbeddingsAPI", "GradcamAPI", "InsightsAPI", "LossAPI", "PipelineAPI"]


class InsightsAPI(InsightBase):
    """``insights``: which of the views a run feeds."""

    @rpc
    def insights(self, run: str) -> dict[str, Any]:
        """Which insight pages apply to ``run``, and the layers each can show."""
        index = self.store.index(run)
        found = (index.get("data") or {}).get("insights")
        if not isinstance(found, dict):
            found = self._insights_from_batch(run, index)
        gradcam = names(found.get("gradcam"))
        attention = names(found.get("attention"))
        reprs = names(found.get("repr"))
        tables = [t for t in found.get("embeddings") or [] if isinstance(t, dict)]
        return {
            "gradcam": bool(gradcam),
            "attention": bool(attention),
            "embeddings": bool(reprs or tables),
            "gradcam_layers": gradcam,
            "attention_layers": attention,
            "attention_absent": None if attention else self._attention_absent(run, found),
            "repr_layers": reprs,
            "tables": tables,
        }

    def _attention_absent(self, run: str, found: dict[str, Any]) -> str:
        """Why a run holds no attention weights, in one true sentence."""
        settings = self.store.reader(run).meta.get("settings") or {}
        unkept = names(found.get("attention_unkept"))
        if unkept:
            return (
                f"Attention ran in {', '.join(unkept[:3])} but no sample values were kept "
                "(--samples 0, or the run reached --max-bytes), so there are no weights to show."
            )
        large = names(found.get("attention_too_large"))
        if large:
            return (
                f"Attention ran in {', '.join(large[:3])}, but one sample's weights (heads × "
                "queries × keys) exceed --max-elems, so none were recomputed; raise --max-elems "
                "to see them."
            )
        if settings.get("attention") is False:
            return (
                "This run holds no attention weights: it was recorded with --no-attention, "
                "and no softmax over query·key scores ran in project code."
            )
        return (
            "This run holds no attention weights: its model made no "
            "scaled_dot_product_attention call and no softmax over query·key scores ran in "
            "its code during a training batch (a softmax inside an installed library's own "
            "modules is not seen)."
        )

    def _insights_from_batch(self, run: str, index: dict[str, Any]) -> dict[str, Any]:
        """The insights of a run recorded before they were noted in its index."""
        batches = training_batches(index)
        if not batches:
            return {}
        record = self.store.chunk(run, "batch", batches[0]).record
        return {
            "gradcam": [g.get("layer") for g in section_list(record, "gradcam")],
            "attention": [a.get("module") for a in section_list(record, "attention")],
            "repr": [r.get("module") for r in section_list(record, "repr")],
        }
