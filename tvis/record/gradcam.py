"""Grad-CAM at the loss call, while the graph is alive.

The maps of the first ``k`` samples (``--samples``) at every conv layer, for the predicted
class, and for the true class only where some kept sample's prediction differs (where
they agree, the maps are the same). The gradients come from the kept samples alone: their
forward is replayed at the loss call with each BatchNorm frozen at the whole batch's
statistics and each dropout module applying the batch's masks (gradcam_replay.py), so
each pass is a backward of ``k`` samples, not of the batch (ResNet-18 at batch 32: two
passes of 3 samples instead of two of 32). Each map is then that sample's own, with
BatchNorm's statistics held constant as Grad-CAM does in evaluation mode. Where a replay
is not safe or does not give the batch's scores back (randomness in the forward outside
dropout modules, hooks of the script's own, scores not made by one model call: see
gradcam_replay.py), an info notice says why and the passes run on the training graph:
from the summed class scores of the kept samples to every conv activation of the batch,
each about a backward of the batch; summing per-sample scores gives each sample's own
gradient except through layers that mix samples (BatchNorm in training), and those maps
are labelled ``approximate``. Neither way writes ``.grad`` or runs tvis's hooks, and it
runs for the first batch of each optimizer step only (with gradient accumulation, the
other micro-batches skip it). Each layer's gradient is let go as soon as its map is made.

A patch embedding (a ViT's kernel = stride conv) is not a Grad-CAM layer: its map is the
input gradient at patch resolution, not class evidence in learned features, and reaching
it costs two backward passes through the whole transformer. A ViT's attention rollout
shows where its tokens look.
"""

from __future__ import annotations

import torch

from tvis.record import gradcam_replay, insights
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
    k = min(rec.settings.samples, logits.shape[0])
    if not k:
        return []
    with torch.no_grad():
        pred = logits.detach()[:k].argmax(-1)
    true = target[:k].long()
    classes = [("pred", pred)] + ([] if torch.equal(pred, true) else [("true", true)])
    acts = [t[:k].detach() for _, t in layers]
    with gradcam_replay.isolated(rec, gradcam_replay.root_module(batch, logits)):
        kept = gradcam_replay.replay(rec, batch, logits, layers, k)
        if isinstance(kept, str):
            rec.notice(
                f"Grad-CAM ran on the whole batch's graph (about a backward each for the "
                f"predicted and the true class): {kept}.",
                level="info",
            )
            scores, targets = logits, [t for _, t in layers]
            mixes = any(schema.MIXES_SAMPLES in c.flags for c in batch.calls)
        else:
            scores, targets, mixes = kept.scores, kept.activations, False
        maps = {}
        for i, (which, cls) in enumerate(classes):
            # Training's graph is always kept; the replay's goes after its last pass.
            retain = isinstance(kept, str) or i < len(classes) - 1
            maps[which] = _maps(scores, cls, targets, acts, retain=retain)
    out = _entries(rec, batch, layers, maps["pred"], "pred", mixes)
    return out + _entries(rec, batch, layers, maps.get("true", maps["pred"]), "true", mixes)


def _maps(scores: torch.Tensor, classes: torch.Tensor, targets: list, acts: list, retain: bool):
    """Grad-CAM of the first ``len(classes)`` samples at each layer (None if unreached):
    gradients from ``scores`` to ``targets``, applied to the batch's activations ``acts``."""
    k = len(classes)
    score = scores[:k].gather(1, classes[:, None]).sum()
    reached = [i for i, t in enumerate(targets) if t is not None]
    grads = list(
        torch.autograd.grad(
            score, [targets[i] for i in reached], retain_graph=retain, allow_unused=True
        )
    )
    maps: list = [None] * len(targets)
    with torch.no_grad():
        for j, i in enumerate(reached):
            g, grads[j] = grads[j], None  # each layer's gradient let go once its map is made
            if g is None:
                continue
            weights = g[:k].mean(dim=(2, 3), keepdim=True)
            maps[i] = torch.relu((weights * acts[i]).sum(1))
            del g
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
