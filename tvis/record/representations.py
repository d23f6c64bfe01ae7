"""Per-sample representations at every depth, for the embeddings view (PCA by class).

Each module's output is pooled to one vector per sample (``sections["repr"]``), and every
``nn.Embedding`` met is noted in the run's insights with the parameter that holds its
table, so the agent can project the table's rows (labelled with the vocabulary) from a
step record.
"""

from __future__ import annotations

import torch

from tvis.record import insights
from tvis.record.extension import Extension

# Features per sample beyond which a pooled output is not kept: PCA over a few hundred
# samples gains nothing from wider vectors, and the bytes add up per layer.
MAX_FEATURES = 4096


class Representations(Extension):
    """Pools each module's output to one vector per sample: conv maps over space,
    token sequences over tokens."""

    def on_module_exit(self, recorder, batch, call, module, output) -> None:
        if batch.light or call.kind != "module" or call.phase == "data":
            return
        if isinstance(module, torch.nn.Embedding):
            _note_table(recorder, call.name, module)
        if not call.outputs:
            return
        entry_id = call.outputs[0].get("tensor")
        t = batch.objects.get(entry_id)
        entry = batch.entries[entry_id] if entry_id is not None else None
        if t is None or entry.get("batch_dim") != 0 or entry.get("batch_span", 1) != 1:
            return
        pooled = _pool(t)
        if pooled is None:
            return
        insights.note(recorder.data_info, "repr", call.name)
        batch.sections.setdefault("repr", []).append(
            {
                "call": call.id,
                "module": call.name,
                "depth": call.depth,
                "tensor": batch.derived(pooled, summarize=False),
            }
        )


def _pool(t: torch.Tensor) -> torch.Tensor | None:
    """One vector per sample: ``[B, C, H, W]`` averaged over space, ``[B, T, D]`` over
    tokens, ``[B, D]`` as it is."""
    if t.dim() not in (2, 3, 4) or not t.is_floating_point():
        return None
    features = t.shape[1] if t.dim() != 3 else t.shape[2]
    if features > MAX_FEATURES:
        return None
    with torch.no_grad():
        if t.dim() == 4:
            return t.mean(dim=(2, 3))
        if t.dim() == 3:
            return t.mean(dim=1)
        return t


def _note_table(recorder, name: str, module: torch.nn.Embedding) -> None:
    insights.note(
        recorder.data_info,
        "embeddings",
        {
            "module": name,
            "param": f"{name}.weight",
            "rows": int(module.num_embeddings),
            "dim": int(module.embedding_dim),
            "padding_idx": module.padding_idx,
        },
    )
