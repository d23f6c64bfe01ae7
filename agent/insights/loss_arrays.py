"""The loss section's arrays of one batch read as tables: per sample (classification), per
token (language models) or per pixel (segmentation: ``loss_pixels``), the worst samples first, the per-element loss, its histograms,
and the reduction redone from the elements."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent.decode import Vocabulary
from tvis.agent.protocol import NOT_FOUND, AgentError
from tvis.store.reader import Chunk
from tvis.store.schema import ReductionCheck

# Values of the per-element loss sent at once: a screen of tokens colours a few thousand.
MAX_ELEMENTS = 65536


class LossArrays:
    """The loss section's arrays of one batch, read as per-sample or per-token tables."""

    def __init__(self, chunk: Chunk, loss: dict[str, Any], batch_size: Any) -> None:
        self.chunk = chunk
        self.loss = loss
        given = loss.get("shape")
        shape: list[Any] | None = given if isinstance(given, list) else None
        self.size = batch_size if isinstance(batch_size, int) and batch_size > 0 else None
        positions = int(np.prod(shape)) if shape else 0
        # A class per pixel (segmentation: targets [B, H, W], or [B, D, H, W]): two or more
        # position dims after the batch, read as pictures, not as a sequence of tokens.
        self.spatial = bool(
            loss.get("fn") in ("cross_entropy", "nll_loss")
            and shape
            and len(shape) >= 3
            and (self.size is None or shape[0] == self.size)
        )
        if self.spatial and shape:
            self.size = int(shape[0])
        # A multi-label loss's row of labels is one sample, not a sequence of tokens.
        self.multilabel = bool(loss.get("multilabel"))
        self.per_token = bool(
            not self.spatial
            and not self.multilabel
            and shape
            and self.size
            and positions != self.size
            and positions % self.size == 0
        )
        # A loss over rows an index or mask picked (a GCN's training nodes of the whole
        # graph: F.nll_loss(out[idx_train], y[idx_train])): its rows are not the batch's
        # samples, so they are numbered within the loss and counted as its rows.
        self.picked_from = (
            self.size
            if shape
            and self.size
            and positions != self.size
            and not self.spatial
            and not self.multilabel
            else None
        )
        if self.picked_from and not self.per_token and shape:
            self.size = int(shape[0])
        else:
            self.picked_from = None
        self.shape = shape

    def has(self, *keys: str) -> bool:
        return all(isinstance(self.loss.get(k), int) for k in keys)

    def values(self, key: str) -> np.ndarray | None:
        tensor = self.loss.get(key)
        if not isinstance(tensor, int):
            return None
        values = self.chunk.array(tensor)
        return None if values is None else np.asarray(values)

    def by_sample(self, key: str) -> np.ndarray | None:
        """``key``'s values as [samples, tokens] (complete samples only)."""
        values = self.values(key)
        if values is None or not self.size or not self.shape:
            return None
        dims = len(self.shape)
        if dims > 1 and list(values.shape[1:dims]) == self.shape[1:]:
            values = values.reshape(-1, *values.shape[dims:])  # positions flattened, [B*T, ...]
        per = int(np.prod(self.shape)) // self.size
        whole = (values.shape[0] // per) * per
        return values[:whole].reshape(whole // per, per, *values.shape[1:])

    def valid_elements(self) -> np.ndarray | None:
        """Every stored per-element loss that counts (padding and ignore_index left out)."""
        per_element = self.values("per_element")
        if per_element is None:
            return None
        values = per_element.reshape(-1).astype(np.float64)
        valid = self.values("valid")
        if valid is not None and valid.size == values.size:
            values = values[valid.reshape(-1).astype(bool)]
        return values

    def histogram(self) -> dict[str, Any] | None:
        """``{counts, lo, hi}`` of the valid per-element losses (32 bins)."""
        return histogram_of(self.valid_elements())

    def sample_histogram(self) -> dict[str, Any] | None:
        """``{counts, lo, hi}`` of the per-sample losses: what a loss of the script's own
        that keeps no per-element losses (a VAE's summed terms) has to show instead."""
        losses = self._per_sample_loss()
        return histogram_of(np.asarray(losses, dtype=np.float64)) if losses else None

    def residual_histogram(self, fn: Any) -> dict[str, Any] | None:
        """|input − target| per element for the regression losses whose elements give it
        exactly (``mse_loss``: √loss, ``l1_loss``: loss); its sign is not recorded."""
        values = self.valid_elements()
        if values is None or fn not in ("mse_loss", "l1_loss"):
            return None
        return histogram_of(np.sqrt(np.maximum(values, 0)) if fn == "mse_loss" else np.abs(values))

    def elements(self, limit: int = MAX_ELEMENTS) -> dict[str, Any]:
        per_element = self.values("per_element")
        valid = self.values("valid")
        out: dict[str, Any] = {"per_element": None, "valid": None, "per_element_shape": None}
        if per_element is not None:
            out["per_element_shape"] = list(per_element.shape)
            out["per_element"] = per_element.reshape(-1)[:limit].astype(np.float32)
            finite = per_element[np.isfinite(per_element)]
            mask = valid.reshape(-1).astype(bool) if valid is not None else None
            if mask is not None and mask.shape == per_element.reshape(-1).shape:
                chosen = per_element.reshape(-1)[mask]
                out["valid_mean"] = float(chosen.mean()) if chosen.size else None
                out["n_valid"] = int(mask.sum())
            else:
                out["valid_mean"] = float(finite.mean()) if finite.size else None
        if valid is not None:
            out["valid"] = valid.reshape(-1)[:limit].astype(np.uint8)
        return out

    def reduction_check(self) -> ReductionCheck | None:
        """How the per-element losses reduce to the scalar the script got, redone here from
        every stored element: ``{reduction, terms, sum, divisor, computed, recorded,
        matches, complete}``; None when the elements or the scalar were not recorded."""
        per_element = self.values("per_element")
        recorded = self.loss.get("value")
        reduction = self.loss.get("reduction")
        if per_element is None or not isinstance(recorded, (int, float)):
            return None
        values = self.valid_elements()
        if values is None:
            return None
        total = float(values.sum())
        weight_sum = self.loss.get("weight_sum")
        shape = (self.chunk.tensor(self.loss["per_element"]) or {}).get("shape")
        if reduction == "sum":
            divisor = 1.0
        elif reduction == "batchmean" and shape:  # F.kl_div's: the sum ÷ the batch size
            divisor = float(shape[0])
        elif isinstance(weight_sum, (int, float)):
            divisor = float(weight_sum)
        else:
            divisor = float(values.size)
        computed = total / divisor if divisor else float("nan")
        complete = not shape or int(np.prod(per_element.shape)) == int(np.prod(shape))
        return ReductionCheck(
            reduction=reduction,
            terms=int(values.size),
            sum=total,
            divisor=divisor,
            weighted=isinstance(weight_sum, (int, float)),
            computed=computed,
            recorded=float(recorded),
            # float32 sums in torch against a float64 sum here: agree to a few ulps per term
            matches=bool(np.isclose(computed, recorded, rtol=1e-4, atol=1e-6))
            if complete
            else None,
            complete=complete,
        )

    def _per_sample_loss(self) -> list:
        per_sample = self.loss.get("per_sample")
        if isinstance(per_sample, list):
            return per_sample
        if self.picked_from:  # the recorder splits by the batch; here each row is one
            values = self.values("per_element")
            if values is not None and values.ndim == 1:
                return values.astype(np.float64).tolist()
        return []

    def worst(self, limit: int) -> list[dict[str, Any]]:
        """Each sample's p(target) → −log p → loss, the highest loss first. A loss that
        does not split by sample (a contrastive loss, a hand-written masked mean) still
        lists every sample, by −log p when the batch has p(target), its loss unknown."""
        losses = self._per_sample_loss()
        p = self.by_sample("p_target")
        n = len(losses) or (p.shape[0] if p is not None else 0)
        rows = []
        for i in range(n):
            value = losses[i] if i < len(losses) else None
            row: dict[str, Any] = {"sample": i, "loss": value}
            if p is not None and i < p.shape[0]:
                probs = p[i].reshape(-1).astype(np.float64)
                probs = probs[np.isfinite(probs)]  # padding has no target
                if probs.size:
                    nll = float(-np.log(np.maximum(probs, 1e-45)).mean())
                    row["neg_log_p"] = nll
                    row["p_target"] = float(np.exp(-nll))  # per token: the geometric mean
            rows.append(row)
        key = "loss" if losses else "neg_log_p"
        rows.sort(key=lambda r: -r[key] if isinstance(r.get(key), (int, float)) else 0)
        return rows[: max(limit, 0)]

    def sample_rows(self, classes: Any) -> list[dict[str, Any]]:
        names = classes if isinstance(classes, list) else []
        losses = self._per_sample_loss()
        columns = {k: self.values(k) for k in ("target", "pred", "p_target", "top_i", "top_p")}
        if self.multilabel:  # a label's each: the sample's is in ``worst``
            columns["p_target"] = None
        n = self.size or len(losses)
        rows = []
        for i in range(n):
            row: dict[str, Any] = {"sample": i}
            if i < len(losses):
                row["loss"] = losses[i]
            for key in ("target", "pred"):
                values = columns[key]
                if values is not None and i < values.shape[0]:
                    row[key] = int(values[i])
                    row[f"{key}_name"] = label(names, row[key])
            if columns["p_target"] is not None and i < columns["p_target"].shape[0]:
                row["p_target"] = float(columns["p_target"][i])
            if "target" in row and "pred" in row:
                row["correct"] = row["target"] == row["pred"]
            soft = self._soft_target(i, names)
            if soft is not None:
                row["soft_target"] = soft
            ti, tp = columns["top_i"], columns["top_p"]
            if ti is not None and tp is not None and i < ti.shape[0]:
                row["top"] = [
                    {"class": int(c), "name": label(names, int(c)), "p": float(p)}
                    for c, p in zip(ti[i], tp[i], strict=True)
                ]
            if self.multilabel:
                row.update(self.label_row(i, names))
            rows.append(row)
        return rows

    def _soft_target(self, i: int, names: list) -> dict[str, Any] | None:
        """Sample ``i``'s soft target: ``{mix: [{class, name, weight}] heaviest first,
        rest}``. A mix (mixup's two classes) has ``rest``, the weight each other class
        has (label smoothing's share), and its classes holding only that are left out; a
        distribution lists its heaviest classes, ``rest`` 0."""
        ti, tp, floor = (self.values(k) for k in ("target_top_i", "target_top_p", "target_floor"))
        if ti is None or tp is None or i >= ti.shape[0]:
            return None
        rest = float(floor[i]) if floor is not None and i < floor.shape[0] else 0.0
        mix = [
            {"class": int(c), "name": label(names, int(c)), "weight": float(w)}
            for c, w in zip(ti[i], tp[i], strict=True)
            if float(w) > rest + 1e-6
        ]
        return {"mix": mix, "rest": rest}

    def label_row(self, i: int, names: list) -> dict[str, Any]:
        """Sample ``i`` of a multi-label loss: its labels set and the model's (p > 0.5),
        each label's p(label present) and loss; ``exact`` when the two sets agree."""
        target, pred = self.by_sample("labels"), self.by_sample("pred_labels")
        if target is None or pred is None or i >= target.shape[0] or i >= pred.shape[0]:
            return {}
        t, p = target[i].reshape(-1).astype(bool), pred[i].reshape(-1).astype(bool)
        p_target, loss = self.by_sample("p_target"), self.by_sample("per_element")
        per_label = []
        for c in range(t.size):
            entry: dict[str, Any] = {"label": c, "name": label(names, c), "target": bool(t[c])}
            entry["pred"] = bool(p[c])
            if p_target is not None and i < p_target.shape[0]:
                q = float(p_target[i].reshape(-1)[c])
                entry["p"] = q if t[c] else 1.0 - q  # p(label present), whatever the target
            if loss is not None and i < loss.shape[0]:
                entry["loss"] = float(loss[i].reshape(-1)[c])
            per_label.append(entry)
        return {
            "labels": np.flatnonzero(t).tolist(),
            "pred_labels": np.flatnonzero(p).tolist(),
            "label_names": [label(names, int(c)) for c in np.flatnonzero(t)],
            "pred_label_names": [label(names, int(c)) for c in np.flatnonzero(p)],
            "exact": bool((t == p).all()),
            "per_label": per_label,
        }

    def sequence_rows(self, vocab: Vocabulary) -> list[dict[str, Any]]:
        """One row per sequence: loss, valid tokens, token accuracy, the target and predicted
        texts (decoded as the script's tokenizer decodes), the worst token."""
        losses = self._per_sample_loss()
        target, pred, valid = (self.by_sample(k) for k in ("target", "pred", "valid"))
        per_element = self.by_sample("per_element")
        rows = []
        for i in range(self.size or 0):
            row: dict[str, Any] = {"sample": i, "loss": losses[i] if i < len(losses) else None}
            if target is not None and i < target.shape[0]:
                mask = valid_mask(valid, i, target.shape[1])
                row["tokens"] = int(mask.sum())
                row["text"] = vocab.text(target[i][mask].tolist())
                if pred is not None and i < pred.shape[0] and mask.any():
                    row["accuracy"] = float((pred[i][mask] == target[i][mask]).mean())
                    row["pred_text"] = vocab.text(pred[i][mask].tolist())
                if per_element is not None and i < per_element.shape[0] and mask.any():
                    losses_i = np.where(mask, per_element[i].reshape(-1), -np.inf)
                    pos = int(np.argmax(losses_i))
                    row["worst"] = {
                        "pos": pos,
                        "token": vocab.token(int(target[i][pos])),
                        "loss": float(losses_i[pos]),
                    }
            rows.append(row)
        return rows

    def token_rows(
        self,
        sample: int,
        vocab: Vocabulary,
        inputs: list[int] | None,
        input_vocab: Vocabulary | None = None,
    ) -> dict[str, Any]:
        """One row per position of ``sample``: input, target, prediction, p(target), loss,
        padding; and the input, target and predicted texts decoded with the vocabulary
        (the input with ``input_vocab``: a translation model's source vocabulary)."""
        source = input_vocab or vocab
        columns = {k: self.by_sample(k) for k in ("target", "pred", "p_target", "per_element")}
        target = columns["target"]
        if target is None or not 0 <= sample < target.shape[0]:
            raise AgentError(f"sample {sample} has no per-token targets recorded.", NOT_FOUND)
        per_element = self.values("per_element")
        if per_element is not None and per_element.size == target.size:
            columns["per_element"] = per_element.reshape(target.shape)
        mask = valid_mask(self.by_sample("valid"), sample, target.shape[1])
        rows = []
        for pos in range(target.shape[1]):
            row: dict[str, Any] = {"pos": pos, "pad": not bool(mask[pos])}
            if inputs is not None and pos < len(inputs):
                row["input"] = inputs[pos]
                row["input_token"] = source.token(inputs[pos])
            for key in ("target", "pred"):
                values = columns[key]
                if values is not None and sample < values.shape[0]:
                    row[key] = int(values[sample, pos])
                    row[f"{key}_token"] = vocab.token(row[key])
            for key, name in (("p_target", "p_target"), ("per_element", "loss")):
                values = columns[key]
                if values is not None and sample < values.shape[0]:
                    row[name] = float(values[sample, pos])
            rows.append(row)
        real = [r for r in rows if not r["pad"]]
        hits = [r for r in real if "pred" in r and r["pred"] == r["target"]]
        return {
            "kind": "tokens",
            "sample": sample,
            "text": {
                "input": source.text(inputs) if inputs is not None else None,
                "target": vocab.text([r["target"] for r in real]),
                "pred": vocab.text([r["pred"] for r in real if "pred" in r]),
            },
            "vocabulary": vocab.note,
            **({"input_vocabulary": source.note} if input_vocab else {}),
            "accuracy": len(hits) / len(real) if real else None,
            "rows": rows,
        }


# Bins of the loss page's histograms: the recorder's tensor histograms use as many.
HIST_BINS = 32


def histogram_of(values: np.ndarray | None) -> dict[str, Any] | None:
    if values is None:
        return None
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    counts, _ = np.histogram(finite, bins=HIST_BINS, range=(lo, hi if hi > lo else lo + 1))
    return {"counts": counts.tolist(), "lo": lo, "hi": hi}


def valid_mask(valid: np.ndarray | None, sample: int, length: int) -> np.ndarray:
    if valid is None or sample >= valid.shape[0]:
        return np.ones(length, dtype=bool)
    return valid[sample].reshape(-1).astype(bool)


def label(names: list, i: int) -> str | None:
    return names[i] if 0 <= i < len(names) else None
