"""Grad-CAM at the loss call, while the graph is alive.

An extra ``torch.autograd.grad`` pass from the summed class scores of the first samples to
every conv activation of the batch: one for the predicted class, and one for the true class
only where some kept sample's prediction differs (where they agree, the maps are the same).
It never writes ``.grad`` and runs with tvis's hooks paused. Summing per-sample scores gives
each sample's own gradient, except through layers that mix samples (BatchNorm in training):
the result is labelled so. Each pass costs about a backward, so it runs for the first batch
of each optimizer step only (with gradient accumulation, the other micro-batches skip it).

A patch embedding (a ViT's kernel = stride conv) is not a Grad-CAM layer: its map is the
input gradient at patch resolution, not class evidence in learned features, and reaching
it costs two backward passes through the whole transformer. A ViT's attention rollout
shows where its tokens look.
"""

from __future__ import annotations

import torch

from tvis.record import insights
from tvis.store import schema


def compute(rec, batch, logits: torch.Tensor, target: torch.Tensor) -> list[dict]:
    """Grad-CAM maps for the first samples, per conv layer, for pred and true class."""
    if not logits.requires_grad or target.dim() != 1 or target.shape[0] != logits.shape[0]:
        return []
    if not rec.first_batch_of_step():
        return []
    layers = _conv_outputs(batch)
    if not layers:
        if any(schema.PATCH_EMBEDDING in c.flags for c in batch.calls):
            rec.notice(
                "Grad-CAM skipped for patch embeddings (a conv with kernel = stride); the "
                "attention rollout on the Insights page shows where a ViT's tokens look.",
                level="info",
            )
        return []
    if _user_backward_hooks(rec):
        rec.notice(
            "Grad-CAM skipped: the model has backward hooks of its own, which tvis's extra "
            "gradient pass would trigger.",
            level="info",
        )
        return []
    k = rec.settings.samples
    with torch.no_grad():
        pred = logits.detach()[:k].argmax(-1)
    true = target[:k].long()
    mixes = any(schema.MIXES_SAMPLES in c.flags for c in batch.calls)
    out = []
    rec.paused = True
    try:
        maps = _maps(logits, pred, layers)
        out += _entries(rec, batch, layers, maps, "pred", mixes)
        if not torch.equal(pred, true):
            maps = _maps(logits, true, layers)
        out += _entries(rec, batch, layers, maps, "true", mixes)
    finally:
        rec.paused = False
    return out


def _maps(logits: torch.Tensor, classes: torch.Tensor, layers: list) -> list:
    """Grad-CAM of the first ``len(classes)`` samples at each layer (None if unreached)."""
    k = len(classes)
    score = logits[:k].gather(1, classes[:, None]).sum()
    grads = torch.autograd.grad(score, [t for _, t in layers], retain_graph=True, allow_unused=True)
    maps = []
    with torch.no_grad():
        for (_, act), g in zip(layers, grads, strict=True):
            if g is None:
                maps.append(None)
                continue
            weights = g[:k].mean(dim=(2, 3), keepdim=True)
            maps.append(torch.relu((weights * act[:k].detach()).sum(1)))
    return maps


def _entries(rec, batch, layers, maps, which: str, mixes: bool) -> list[dict]:
    out = []
    for (call, _), cam in zip(layers, maps, strict=True):
        if cam is None:
            continue
        insights.note(rec.data_info, "gradcam", call.name)
        out.append(
            {
                "call": call.id,
                "layer": call.name,
                "which": which,
                "tensor": batch.derived(cam),
                "approximate": mixes,
            }
        )
    return out


def _conv_outputs(batch) -> list:
    layers = []
    for call in batch.calls:
        if call.cls not in ("Conv2d", "LazyConv2d") or not call.outputs:
            continue
        if schema.PATCH_EMBEDDING in call.flags:
            continue
        entry_id = call.outputs[0].get("tensor")
        t = batch.objects.get(entry_id)
        if t is not None and t.dim() == 4 and t.requires_grad and t.shape[0] == batch.batch_size:
            layers.append((call, t))
    return layers


def _user_backward_hooks(rec) -> bool:
    from torch.nn.modules import module as nn_module

    if nn_module._global_backward_hooks or nn_module._global_backward_pre_hooks:
        return True
    return any(
        m._backward_hooks or m._backward_pre_hooks
        for root in rec.roots.values()
        for m in root.modules()
    )
