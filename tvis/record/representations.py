"""Per-sample representations at every depth, for the embeddings view (PCA by class)."""

from __future__ import annotations

import torch

from tvis.record.extension import Extension

# Features per sample beyond which a pooled output is not kept: PCA over a few hundred
# samples gains nothing from wider vectors, and the bytes add up per layer.
MAX_FEATURES = 4096


class Representations(Extension):
    """Pools each module's output to one vector per sample: conv maps over space,
    token sequences over tokens."""

    def on_module_exit(self, recorder, batch, call, module, output) -> None:
        if batch.light or call.kind != "module" or not call.outputs:
            return
        entry_id = call.outputs[0].get("tensor")
        t = batch.objects.get(entry_id)
        entry = batch.entries[entry_id] if entry_id is not None else None
        if t is None or entry.get("batch_dim") != 0 or entry.get("batch_span", 1) != 1:
            return
        if t.dim() < 2 or not t.is_floating_point() or t.shape[1] > MAX_FEATURES:
            return
        with torch.no_grad():
            if t.dim() == 4:
                pooled = t.mean(dim=(2, 3))
            elif t.dim() == 3:
                pooled = t.mean(dim=1)
                if pooled.shape[1] > MAX_FEATURES:
                    return
            elif t.dim() == 2:
                pooled = t
            else:
                return
        batch.sections.setdefault("repr", []).append(
            {
                "call": call.id,
                "module": call.name,
                "depth": call.depth,
                "tensor": batch.derived(pooled),
            }
        )
