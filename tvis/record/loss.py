"""The loss call: how it reduces, the loss of every sample, and what the model predicted.

``torch.nn.functional``'s losses are wrapped (the ``nn.*Loss`` modules call them too).
The user's call runs untouched and its result is returned as is; tvis then recomputes
the unreduced loss under ``no_grad`` and derives small per-sample arrays, kept for every
sample even when the logits themselves are too big to store.
"""

from __future__ import annotations

import functools
import inspect
import sys

import torch
import torch.nn.functional as F

from tvis.record import (
    backward_loss,
    ctc_decode,
    ctc_vocabulary,
    gradcam,
    label_names,
    seq_first,
    vocabulary,
)
from tvis.record.builder import Call
from tvis.record.compiled import compiling
from tvis.record.extension import Extension
from tvis.record.wrapped import project_site

LOSSES = (
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "ctc_loss",
)


# The binary losses: input is a probability, or a logit (``_with_logits``).
BINARY = ("binary_cross_entropy", "binary_cross_entropy_with_logits")

# Top-k predictions kept per sample (or per token): what the Loss page lists.
TOP_K = 5

# Elements each per-sample or per-token array may keep, whatever --max-elems says: these
# arrays are what the loss views need when the logits themselves are too big to store,
# and at 4 bytes per element they stay a few MB for a batch of a million tokens.
DERIVED_ELEMS = 1 << 22

# Logit elements turned into float32 at once while decoding: bounds the extra memory of
# a large vocabulary to 64 MB.
CHUNK_ELEMS = 1 << 24


class LossCapture(Extension):
    """Wraps the functional losses for the length of the recording."""

    def install(self, recorder) -> None:
        self.inside = False
        for name in LOSSES:
            original = getattr(F, name)
            recorder.patches.set(F, name, self._wrap(recorder, name, original))

    def _wrap(self, rec, name: str, original):
        signature = inspect.signature(original)

        @functools.wraps(original)
        def loss_fn(*args, **kwargs):
            # Re-entry: __torch_function__ dispatch calls the (wrapped) function again.
            if (
                compiling()
                or self.inside
                or rec.paused
                or rec.busy
                or rec.counting
                or (rec.batch is None and not rec.stack)
                or rec.rerun()
            ):
                return original(*args, **kwargs)
            if rec.stopped or rec.stop_due:
                rec.check_stop()
            self.inside = True
            try:
                try:
                    call = self._open(rec, name, args, kwargs)
                except Exception as e:
                    rec.guard(f"recording the {name} call", e)
                    call = None
                try:
                    out = original(*args, **kwargs)
                except BaseException:
                    if getattr(call, "_opened_here", False) and rec.stack and rec.stack[-1] is call:
                        rec.stack.pop()  # a failing loss call must not stay open
                    raise
                with rec.work:
                    try:
                        self._analyse(rec, call, name, original, signature, args, kwargs, out)
                    except Exception as e:
                        rec.guard(f"analysing the {name} loss", e)
                return out
            finally:
                self.inside = False

        return loss_fn

    def before_backward(self, recorder, batch, loss) -> None:
        if batch.light or not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            return
        backward_loss.find(recorder, batch, loss)

    def _open(self, rec, name: str, args, kwargs) -> Call | None:
        """A call of its own for a functional loss; inside an ``nn.*Loss`` module, the
        module's call is the loss call."""
        if rec.in_loss and rec.stack and rec.stack[-1] is not None:
            return rec.stack[-1]
        with rec.work:
            batch = rec.ensure_batch() if rec.stack else rec.batch
            if batch is None or (batch.full and batch.light):
                return None
            call = Call(
                id=0,
                parent=-1,
                depth=0,
                kind="loss",
                name=f"F.{name}",
                cls=None,
                phase="loss",
                definition=None,
                # frame 0 is _open, 1 the wrapper: the caller is the user's loss line.
                site=project_site(rec, sys._getframe(2)),
                t0=(rec.work.started - rec.overhead - batch.started) * 1e3,
                no_grad=not torch.is_grad_enabled(),
            )
            call.inputs = batch.args(
                list(zip(("input", "target"), args, strict=False)), not batch.light
            )
            rec.open_call(batch, call)
            call._opened_here = True
            return call

    def _analyse(self, rec, call, name, original, signature, args, kwargs, out) -> None:
        batch = rec.batch
        if call is None or batch is None or call.owner != batch.index:
            return
        if getattr(call, "_opened_here", False):
            if rec.stack and rec.stack[-1] is call:
                rec.stack.pop()
            call.fwd_ms = (rec.work.started - rec.overhead - batch.started) * 1e3 - call.t0
            call.outputs = batch.args([("out", out)], not batch.light)
            if call.depth == 0:
                batch.phase_ms["loss"] = batch.phase_ms.get("loss", 0) + call.fwd_ms
            if not batch.light and torch.is_grad_enabled():
                rec.watch_gradients(batch, call)
        if isinstance(out, torch.Tensor) and out.numel() == 1 and call.depth == 0:
            batch.loss = float(out.detach())
        if name in backward_loss.DIVERGENCES:
            # A term found at backward: re-applied per sample there when it is the loss.
            backward_loss.note_scalar(batch, out, ("call", call, original, args, kwargs))
            return
        if batch.light or "loss" in batch.sections:
            return  # the first loss of a training batch is the one analysed
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        params = dict(bound.arguments)
        if name == "ctc_loss":
            section = _ctc(batch, call, original, params, out)
            if section is not None:
                batch.sections["loss"] = section
                batch.loss_tensor = out
                texts = section.get("ctc")
                if texts:
                    frame = sys._getframe(1)
                    ctc_vocabulary.settle(rec, texts["classes"], texts["blank"], frame)
            return
        logits, target = params.get("input"), params.get("target")
        if not isinstance(logits, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        with torch.no_grad():
            per_element = original(**{**params, "reduction": "none"})
        section = {
            "call": call.id,
            "fn": name,
            "reduction": params.get("reduction", "mean"),
            "ignore_index": params.get("ignore_index"),
            "label_smoothing": params.get("label_smoothing"),
            "value": float(out.detach()) if out.numel() == 1 else None,
        }
        section.update(_divisor(name, params, target))
        section.update(_per_sample(batch, per_element, target, params.get("ignore_index")))
        if name in ("cross_entropy", "nll_loss"):
            section.update(_decode(batch, logits, target, name, params.get("ignore_index")))
            if name == "cross_entropy":  # class probabilities as its target
                section.update(decode_soft(batch, logits, target))
        elif name in BINARY:
            section.update(_decode_binary(batch, logits, target, name))
        batch.sections["loss"] = section
        batch.loss_tensor = out
        vocabulary.settle(rec, section.get("classes"))
        if section.get("multilabel"):
            label_names.settle(rec, section["shape"][1], sys._getframe(1))
        if (
            rec.settings.gradcam
            and name == "cross_entropy"
            and logits.dim() == 2
            and not section.get("contrastive")  # no class to explain
        ):
            cams = gradcam.compute(rec, batch, logits, target)
            if cams:
                batch.sections["gradcam"] = cams


def _ctc(batch, call, original, params: dict, out) -> dict | None:
    """CTC over (T, B, C) log-probabilities: each sample's loss is its own alignment
    sum, had exactly with ``reduction="none"``. A ``mean`` divides each by its target
    length before averaging over the batch, so that is each sample's share here too."""
    log_probs, lengths = params.get("log_probs"), params.get("target_lengths")
    if not isinstance(log_probs, torch.Tensor) or not isinstance(out, torch.Tensor):
        return None
    reduction = params.get("reduction", "mean")
    with torch.no_grad():
        per_sample = original(**{**params, "reduction": "none"}).detach().float()
        if reduction == "mean":
            lengths = torch.as_tensor(lengths, device=per_sample.device)
            per_sample = per_sample / lengths.clamp(min=1).to(per_sample.dtype)
    if per_sample.dim() != 1:
        return None
    return {
        "call": call.id,
        "fn": "ctc_loss",
        "reduction": reduction,
        "ignore_index": None,
        "label_smoothing": None,
        "value": float(out.detach()) if out.numel() == 1 else None,
        "weighted": False,
        "per_element": batch.derived(per_sample, DERIVED_ELEMS),
        "per_sample": per_sample.tolist(),
        "tokens_per_sample": None,
        "merged": False,
        **_ctc_texts(params, log_probs),
    }


def _ctc_texts(params: dict, log_probs: torch.Tensor) -> dict:
    """``ctc``: each sample's target and greedy-decoded ids, the blank, and the class count
    a character map's size must match; nothing when the arguments do not decode."""
    found = ctc_decode.decoded(params)
    return {} if found is None else {"ctc": {**found, "classes": int(log_probs.shape[-1])}}


def _divisor(name: str, params: dict, target: torch.Tensor) -> dict:
    """What a weighted ``mean`` divides by: the summed class weights of the counted targets
    (``weight_sum``), so the viewer can redo the reduction; unweighted means count elements."""
    weight = params.get("weight")
    if not isinstance(weight, torch.Tensor) or name not in ("cross_entropy", "nll_loss"):
        return {"weighted": isinstance(weight, torch.Tensor)}
    if target.is_floating_point():  # class probabilities: torch divides by the batch size
        return {"weighted": True}
    with torch.no_grad():
        ignore = params.get("ignore_index")
        counted = target[target != ignore] if isinstance(ignore, int) else target.reshape(-1)
        total = weight.reshape(-1)[counted.reshape(-1)].double().sum()
    return {"weighted": True, "weight_sum": float(total)}


def _per_sample(batch, per_element: torch.Tensor, target: torch.Tensor, ignore_index) -> dict:
    """Per-element loss and its mean per sample (ignored positions excluded)."""
    b = batch.batch_size
    valid = None
    if (
        ignore_index is not None
        and target.dtype in (torch.int64, torch.int32)
        and target.shape == per_element.shape
    ):
        valid = target != ignore_index
    order = seq_first.sample_order(batch, per_element.numel()) if per_element.dim() else None
    if order is not None:  # time-major rows of a sequence-first model: sample by sample
        per_element = per_element.reshape(-1)[order.to(per_element.device)]
        valid = None if valid is None else valid.reshape(-1)[order.to(valid.device)]
    out = {"per_element": batch.derived(per_element.float(), DERIVED_ELEMS)}
    if valid is not None:
        out["valid"] = batch.derived(valid, DERIVED_ELEMS)
        batch.loss_valid = valid.reshape(-1)  # a hand mask found at backward narrows it
    if not b or per_element.dim() == 0 or per_element.numel() % b:
        return out
    rows = per_element.reshape(b, -1).float()
    mask = valid.reshape(b, -1).float() if valid is not None else torch.ones_like(rows)
    per_sample = (rows * mask).sum(1) / mask.sum(1).clamp(min=1)
    out["per_sample"] = per_sample.tolist()
    out["tokens_per_sample"] = rows.shape[1] if per_element.shape[0] != b else None
    out["merged"] = per_element.shape[0] != b  # [B*T] flattened: sample split inferred
    if order is not None:
        out["time_major"] = True  # the stored per-token arrays are reordered sample by sample
    return out


def _contrastive(logits: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether the logits are a batch's B×B similarities and each row's target is its own
    position (CLIP's, InfoNCE's ``arange(B)``): the "classes" are then batch positions."""
    n = target.numel()
    if logits.dim() != 2 or tuple(logits.shape) != (n, n) or n < 2:
        return False
    with torch.no_grad():
        return bool(torch.equal(target, torch.arange(n, device=target.device)))


def _decode(batch, logits: torch.Tensor, target: torch.Tensor, name: str, ignore_index) -> dict:
    """Target, prediction, p(target) and top-k for every sample or token, computed a few
    rows at a time so a large vocabulary never needs a second copy of the logits."""
    if logits.dim() >= 3 and target.shape == logits.shape[:1] + logits.shape[2:]:
        logits = logits.movedim(1, -1)  # [B, C, ...] as the losses take it: classes last
    if logits.dim() < 2 or target.shape != logits.shape[:-1]:
        return {}
    flat = logits.detach().reshape(-1, logits.shape[-1])
    t = target.reshape(-1).long()
    n, classes = flat.shape
    contrastive = _contrastive(logits, t)
    k = min(TOP_K, classes)
    with_top = n * k <= DERIVED_ELEMS
    p_target = torch.empty(n, device=flat.device)
    pred = torch.empty(n, dtype=torch.int32, device=flat.device)
    top_i = torch.empty((n, k) if with_top else (0, k), dtype=torch.int32, device=flat.device)
    top_p = torch.empty(top_i.shape, device=flat.device)
    rows = max(1, CHUNK_ELEMS // classes)
    with torch.no_grad():
        for start in range(0, n, rows):
            part = flat[start : start + rows].float()
            # cross_entropy takes logits; nll_loss takes log-probabilities already.
            norm = part.logsumexp(-1, keepdim=True) if name == "cross_entropy" else 0.0
            safe = t[start : start + rows].clamp(0, classes - 1)
            p_target[start : start + rows] = (part.gather(1, safe[:, None]) - norm).exp()[:, 0]
            values, indices = part.topk(k, dim=-1)
            pred[start : start + rows] = indices[:, 0]
            if with_top:
                top_i[start : start + rows] = indices
                top_p[start : start + rows] = (values - norm).exp()
        if ignore_index is not None:
            p_target[t == ignore_index] = float("nan")
    order = seq_first.sample_order(batch, n)
    shape = list(target.shape)
    if order is not None:  # time-major rows of a sequence-first model: sample by sample
        order = order.to(flat.device)
        t, pred, p_target = t[order], pred[order], p_target[order]
        if with_top:
            top_i, top_p = top_i[order], top_p[order]
        if len(shape) >= 2 and shape[:2] == [batch.seq_len, batch.batch_size]:
            shape[:2] = shape[1], shape[0]
    out = {
        "classes": int(classes),
        "target": batch.derived(t.to(torch.int32), DERIVED_ELEMS),
        "pred": batch.derived(pred, DERIVED_ELEMS),
        "p_target": batch.derived(p_target, DERIVED_ELEMS),
        "shape": shape,
    }
    if contrastive:
        out["contrastive"] = True
    if with_top:
        out["top_i"] = batch.derived(top_i, DERIVED_ELEMS)
        out["top_p"] = batch.derived(top_p, DERIVED_ELEMS)
    return out


# A soft target's heaviest classes kept per sample: mixup and cutmix mix two labels; a
# label distribution (an age's Gaussian over the age bins) is read by its first few.
SOFT_CLASSES = 3

# How far a class's weight may lie from the lightest one's and still be "every other
# class" of a mix (label smoothing's equal share, in float32).
SOFT_REST_TOLERANCE = 1e-6


def decode_soft(batch, logits: torch.Tensor, target: torch.Tensor) -> dict:
    """For a target that is a distribution over the classes: each sample's heaviest
    target classes and their weights, and the prediction and top-k of the scores.
    ``soft_target`` is ``"mix"`` when every sample's target is at most two classes over an
    equal share for all the others (mixup's λ·y₁ + (1−λ)·y₂, label smoothing's spread:
    that share is ``target_floor``), else ``"distribution"``. Nothing for class ids."""
    if (
        logits.dim() != 2
        or target.shape != logits.shape
        or not target.is_floating_point()
        or not logits.is_floating_point()
        or logits.shape[1] < SOFT_CLASSES
    ):
        return {}
    with torch.no_grad():
        t = target.detach().float()
        if not bool((t >= 0).all()) or not bool(((t.sum(1) - 1).abs() < 1e-3).all()):
            return {}  # not a distribution per sample
        weights, classes = t.topk(SOFT_CLASSES, dim=1)
        floor = t.min(1, keepdim=True).values
        others = t.scatter(1, classes[:, :2], floor.expand(-1, 2))
        mix = bool(((others - floor).abs() <= SOFT_REST_TOLERANCE).all())
        p = logits.detach().float().softmax(1)
        top_p, top_i = p.topk(min(TOP_K, p.shape[1]), dim=1)
        out = {
            "classes": int(t.shape[1]),
            "soft_target": "mix" if mix else "distribution",
            "target_top_i": batch.derived(classes.to(torch.int32), DERIVED_ELEMS),
            "target_top_p": batch.derived(weights, DERIVED_ELEMS),
            "pred": batch.derived(top_i[:, 0].to(torch.int32), DERIVED_ELEMS),
            "top_i": batch.derived(top_i.to(torch.int32), DERIVED_ELEMS),
            "top_p": batch.derived(top_p, DERIVED_ELEMS),
            "shape": [int(t.shape[0])],
        }
        if mix:
            out["target_floor"] = batch.derived(floor[:, 0], DERIVED_ELEMS)
        return out


def _decode_binary(batch, scores: torch.Tensor, target: torch.Tensor, name: str) -> dict:
    """p(target) of a binary loss with hard 0/1 targets: with one score per sample (a GAN's
    real/fake, a yes/no classifier) also the target and prediction as two classes; with a
    row of scores per sample (multi-label tagging) each label's p(target), so a sample's
    −log p is its mean loss. Soft targets (label smoothing) have no p(target)."""
    b, n = batch.batch_size, target.numel()
    if scores.shape != target.shape or not b or n == 0 or target.shape[0] != b:
        return {}
    with torch.no_grad():
        t = target.detach().reshape(-1)
        if not bool(((t == 0) | (t == 1)).all()):
            return {}
        p = scores.detach().reshape(-1).float()
        if name.endswith("_with_logits"):
            p = p.sigmoid()
        is_one = t == 1
        p_target = torch.where(is_one, p, 1 - p)
        pred = (p > 0.5).to(torch.int32)
    if n != b:  # several labels a sample: one row of labels each, the set and its guess
        return {
            "p_target": batch.derived(p_target, DERIVED_ELEMS),
            "labels": batch.derived(is_one.to(torch.uint8), DERIVED_ELEMS),
            "pred_labels": batch.derived(pred.to(torch.uint8), DERIVED_ELEMS),
            "shape": [b, n // b],
            "multilabel": True,
        }
    return {
        "classes": 2,
        "target": batch.derived(is_one.to(torch.int32), DERIVED_ELEMS),
        "pred": batch.derived(pred, DERIVED_ELEMS),
        "p_target": batch.derived(p_target, DERIVED_ELEMS),
        "shape": [n],
    }
