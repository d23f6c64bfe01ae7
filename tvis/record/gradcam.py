"""Grad-CAM at the loss call, while the graph is alive.

One extra ``torch.autograd.grad`` pass per class choice (predicted, true) from the summed
class scores to every conv activation of the batch. It never writes ``.grad`` and runs with
tvis's hooks paused. Summing per-sample scores gives each sample's own gradient, except
through layers that mix samples (BatchNorm in training): the result is labelled so.
"""

from __future__ import annotations

import torch

from tvis.record import insights


def compute(rec, batch, logits: torch.Tensor, target: torch.Tensor) -> list[dict]:
    """Grad-CAM maps for the first samples, per conv layer, for pred and true class."""
    if not logits.requires_grad or target.dim() != 1 or target.shape[0] != logits.shape[0]:
        return []
    layers = _conv_outputs(batch)
    if not layers:
        return []
    if _user_backward_hooks(rec):
        rec.notice(
            "Grad-CAM skipped: the model has backward hooks of its own, which tvis's extra "
            "gradient pass would trigger.",
            level="info",
        )
        return []
    acts = [t for _, t in layers]
    with torch.no_grad():
        pred = logits.detach().argmax(-1)
    classes = {"pred": pred, "true": target.long()}
    mixes = any("mixes_samples" in c.flags for c in batch.calls)
    k = rec.settings.samples
    out = []
    rec.paused = True
    try:
        for which, cls in classes.items():
            score = logits.gather(1, cls[:, None]).sum()
            grads = torch.autograd.grad(score, acts, retain_graph=True, allow_unused=True)
            with torch.no_grad():
                for (call, act), g in zip(layers, grads, strict=True):
                    if g is None:
                        continue
                    weights = g[:k].mean(dim=(2, 3), keepdim=True)
                    cam = torch.relu((weights * act[:k].detach()).sum(1))
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
    finally:
        rec.paused = False
    return out


def _conv_outputs(batch) -> list:
    layers = []
    for call in batch.calls:
        if call.cls not in ("Conv2d", "LazyConv2d") or not call.outputs:
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
