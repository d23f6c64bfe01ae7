"""The loss section's arrays of one batch read as tables: per sample (classification) or
per token (language models), the worst samples first, and the per-element loss."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent import insight_views as iv
from tvis.agent.insights.common import token
from tvis.agent.protocol import NOT_FOUND, AgentError
from tvis.store.reader import Chunk

# Values of the per-element loss sent at once: a screen of tokens colours a few thousand.
MAX_ELEMENTS = 65536


class LossArrays:
    """The loss section's arrays of one batch, read as per-sample or per-token tables."""

    def __init__(self, chunk: Chunk, loss: dict[str, Any], batch_size: Any) -> None:
        self.chunk = chunk
        self.loss = loss
        shape = loss.get("shape") if isinstance(loss.get("shape"), list) else None
        self.size = batch_size if isinstance(batch_size, int) and batch_size > 0 else None
        positions = int(np.prod(shape)) if shape else 0
        self.per_token = bool(
            shape and self.size and positions != self.size and positions % self.size == 0
        )
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

    def elements(self) -> dict[str, Any]:
        per_element = self.values("per_element")
        valid = self.values("valid")
        out: dict[str, Any] = {"per_element": None, "valid": None, "per_element_shape": None}
        if per_element is not None:
            out["per_element_shape"] = list(per_element.shape)
            out["per_element"] = per_element.reshape(-1)[:MAX_ELEMENTS].astype(np.float32)
            finite = per_element[np.isfinite(per_element)]
            mask = valid.reshape(-1).astype(bool) if valid is not None else None
            if mask is not None and mask.shape == per_element.reshape(-1).shape:
                chosen = per_element.reshape(-1)[mask]
                out["valid_mean"] = float(chosen.mean()) if chosen.size else None
                out["n_valid"] = int(mask.sum())
            else:
                out["valid_mean"] = float(finite.mean()) if finite.size else None
        if valid is not None:
            out["valid"] = valid.reshape(-1)[:MAX_ELEMENTS].astype(np.uint8)
        return out

    def _per_sample_loss(self) -> list:
        per_sample = self.loss.get("per_sample")
        return per_sample if isinstance(per_sample, list) else []

    def worst(self, limit: int) -> list[dict[str, Any]]:
        """Each sample's p(target) → −log p → loss, the highest loss first."""
        losses = self._per_sample_loss()
        p = self.by_sample("p_target")
        rows = []
        for i, value in enumerate(losses):
            row: dict[str, Any] = {"sample": i, "loss": value}
            if p is not None and i < p.shape[0]:
                probs = p[i].reshape(-1).astype(np.float64)
                probs = probs[np.isfinite(probs)]  # padding has no target
                if probs.size:
                    nll = float(-np.log(np.maximum(probs, 1e-45)).mean())
                    row["neg_log_p"] = nll
                    row["p_target"] = float(np.exp(-nll))  # per token: the geometric mean
            rows.append(row)
        rows.sort(key=lambda r: -r["loss"] if isinstance(r["loss"], (int, float)) else 0)
        return rows[: max(limit, 0)]

    def sample_rows(self, classes: Any) -> list[dict[str, Any]]:
        names = classes if isinstance(classes, list) else []
        losses = self._per_sample_loss()
        columns = {k: self.values(k) for k in ("target", "pred", "p_target", "top_i", "top_p")}
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
            ti, tp = columns["top_i"], columns["top_p"]
            if ti is not None and tp is not None and i < ti.shape[0]:
                row["top"] = [
                    {"class": int(c), "name": label(names, int(c)), "p": float(p)}
                    for c, p in zip(ti[i], tp[i], strict=True)
                ]
            rows.append(row)
        return rows

    def sequence_rows(self, vocab: Any) -> list[dict[str, Any]]:
        """One row per sequence: loss, valid tokens, token accuracy, the target text."""
        losses = self._per_sample_loss()
        target, pred, valid = (self.by_sample(k) for k in ("target", "pred", "valid"))
        rows = []
        for i in range(self.size or 0):
            row: dict[str, Any] = {"sample": i, "loss": losses[i] if i < len(losses) else None}
            if target is not None and i < target.shape[0]:
                mask = valid_mask(valid, i, target.shape[1])
                row["tokens"] = int(mask.sum())
                row["text"] = iv.join_tokens([token(vocab, int(t)) for t in target[i][mask]])
                if pred is not None and i < pred.shape[0] and mask.any():
                    row["accuracy"] = float((pred[i][mask] == target[i][mask]).mean())
            rows.append(row)
        return rows

    def token_rows(self, sample: int, vocab: Any, inputs: list[int] | None) -> dict[str, Any]:
        """One row per position of ``sample``: input, target, prediction, p(target), loss,
        padding; and the input, target and predicted texts decoded with the vocabulary."""
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
                row["input_token"] = token(vocab, inputs[pos])
            for key in ("target", "pred"):
                values = columns[key]
                if values is not None and sample < values.shape[0]:
                    row[key] = int(values[sample, pos])
                    row[f"{key}_token"] = token(vocab, row[key])
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
                "input": iv.join_tokens([r["input_token"] for r in rows if "input_token" in r])
                if inputs is not None
                else None,
                "target": iv.join_tokens([r["target_token"] for r in real]),
                "pred": iv.join_tokens([r["pred_token"] for r in real if "pred_token" in r]),
            },
            "accuracy": len(hits) / len(real) if real else None,
            "rows": rows,
        }


def valid_mask(valid: np.ndarray | None, sample: int, length: int) -> np.ndarray:
    if valid is None or sample >= valid.shape[0]:
        return np.ones(length, dtype=bool)
    return valid[sample].reshape(-1).astype(bool)


def label(names: list, i: int) -> str | None:
    return names[i] if 0 <= i < len(names) else None
