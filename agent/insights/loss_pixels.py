"""A segmentation loss read as pictures: one sample's target mask, predicted mask and
per-pixel loss, its pixel accuracy, and each class's IoU over a batch or the run.

The recorder keeps, for every pixel, the target class, the argmax prediction, the loss and
whether ``ignore_index`` left it out (``tvis/record/loss.py``); here they are cut to one
sample's plane and shrunk to what one reply carries.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tvis.agent.insights.loss_arrays import LossArrays, label
from tvis.agent.protocol import NOT_FOUND, AgentError

PIXELS_SHOWN = 4096
"""Positions of a plane sent at once (64×64): target and prediction (int32), loss
(float32) and two masks (uint8) come to 56 KiB, inside the 64 KiB a screenful is kept to;
a mask of more pixels than a terminal shows gains nothing."""

MAX_IOU_CLASSES = 256
"""Classes listed in an IoU table: beyond this the ones with the most pixels are kept."""


def stride_for(height: int, width: int, budget: int = PIXELS_SHOWN) -> int:
    """The smallest step that keeps every ``step``-th row and column within ``budget``."""
    step = 1
    while -(-height // step) * -(-width // step) > budget:
        step += 1
    return step


def block_mean(values: np.ndarray, valid: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean of the valid values in each ``step``×``step`` block, and where a block has
    no valid value (its mean is then 0 and the block is marked)."""
    h, w = values.shape
    hh, ww = -(-h // step) * step, -(-w // step) * step
    v = np.zeros((hh, ww), np.float64)
    m = np.zeros((hh, ww), np.float64)
    v[:h, :w] = np.where(valid, values, 0.0)
    m[:h, :w] = valid
    shape = (hh // step, step, ww // step, step)
    total, count = v.reshape(shape).sum((1, 3)), m.reshape(shape).sum((1, 3))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), 0.0)
    return mean.astype(np.float32), count == 0


class PixelArrays:
    """One batch's per-pixel arrays (a loss whose target has two or more position dims)."""

    def __init__(self, table: LossArrays) -> None:
        assert table.spatial and table.shape  # built for a per-pixel loss only
        self.table = table
        self.positions = [int(d) for d in table.shape[1:]]

    def _sample(self, key: str, sample: int) -> np.ndarray | None:
        values = self.table.by_sample(key)
        if values is None or not 0 <= sample < values.shape[0]:
            return None
        return values[sample].reshape(self.positions)

    def _valid(self, sample: int) -> np.ndarray:
        valid = self._sample("valid", sample)
        return np.ones(self.positions, bool) if valid is None else valid.astype(bool)

    def slice_note(self) -> str | None:
        """Which plane of a volume is shown (the middle one of each leading dim)."""
        lead = self.positions[:-2]
        if not lead:
            return None
        where = ", ".join(str(d // 2) for d in lead)
        dims = "×".join(map(str, self.positions))
        return f"the middle slice [{where}, :, :] of {dims}"

    def _plane(self, volume: np.ndarray) -> np.ndarray:
        return volume[tuple(d // 2 for d in self.positions[:-2])]

    def view(self, sample: int, names: list | None) -> dict[str, Any]:
        """The followed sample as pictures: target, prediction, loss and the ignore masks,
        reduced by a common stride when larger than ``PIXELS_SHOWN``."""
        target = self._sample("target", sample)
        if target is None:
            raise AgentError(f"sample {sample} has no per-pixel targets recorded.", NOT_FOUND)
        pred, loss = self._sample("pred", sample), self._sample("per_element", sample)
        valid = self._valid(sample)
        accuracy = None
        if pred is not None and valid.any():
            accuracy = float((pred[valid] == target[valid]).mean())
        t_plane, v_plane = self._plane(target), self._plane(valid)
        h, w = t_plane.shape
        step = stride_for(h, w)
        out: dict[str, Any] = {
            "kind": "pixels",
            "sample": sample,
            "shape": [h, w],
            "shown": [-(-h // step), -(-w // step)],
            "stride": step,
            "slice": self.slice_note(),
            "target": np.ascontiguousarray(t_plane[::step, ::step], dtype=np.int32),
            "ignored": np.ascontiguousarray(~v_plane[::step, ::step], dtype=np.uint8),
            "classes": self.table.loss.get("classes"),
            "ignore_index": self.table.loss.get("ignore_index"),
            "accuracy": accuracy,
            "valid_pixels": int(valid.sum()),
            "pixels": int(valid.size),
        }
        if pred is not None:
            out["pred"] = np.ascontiguousarray(self._plane(pred)[::step, ::step], dtype=np.int32)
        shown = [out["target"][out["ignored"] == 0]] + ([out["pred"]] if "pred" in out else [])
        present = np.unique(np.concatenate([a.reshape(-1) for a in shown]))
        present = present[present >= 0][:MAX_IOU_CLASSES]
        out["present"] = present.tolist()  # the classes the pictures show, for their legend
        out["names"] = [label(names or [], int(c)) for c in present]
        if loss is not None:
            plane = self._plane(loss).astype(np.float64)
            out["loss"], empty = block_mean(plane, v_plane, step)
            out["loss_ignored"] = empty.astype(np.uint8)
            chosen = loss[valid]
            out["loss_mean"] = float(chosen.mean()) if chosen.size else None
        return out

    def sample_rows(self) -> list[dict[str, Any]]:
        """Per sample: its loss (mean over its valid pixels) and pixel accuracy."""
        losses = self.table.loss.get("per_sample")
        target, pred = self.table.by_sample("target"), self.table.by_sample("pred")
        valid = self.table.by_sample("valid")
        rows = []
        for i in range(self.table.size or 0):
            row: dict[str, Any] = {"sample": i}
            if isinstance(losses, list) and i < len(losses):
                row["loss"] = losses[i]
            if target is not None and pred is not None and i < min(len(target), len(pred)):
                mask = valid[i].astype(bool) if valid is not None and i < len(valid) else None
                t, p = (target[i], pred[i]) if mask is None else (target[i][mask], pred[i][mask])
                if t.size:
                    row["accuracy"] = float((t == p).mean())
            rows.append(row)
        return rows

    def pairs(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Every recorded valid pixel's (target, prediction), flat."""
        target, pred = self.table.values("target"), self.table.values("pred")
        if target is None or pred is None:
            return None
        target, pred = target.reshape(-1), pred.reshape(-1)
        n = min(target.size, pred.size)
        target, pred = target[:n], pred[:n]
        valid = self.table.values("valid")
        if valid is not None and valid.size >= n:
            keep = valid.reshape(-1)[:n].astype(bool)
            target, pred = target[keep], pred[keep]
        return target, pred


def iou_table(
    pairs: Iterable[tuple[np.ndarray, np.ndarray]], classes: Any, names: Any
) -> dict[str, Any] | None:
    """Each class's intersection over union of target and prediction over ``pairs`` (valid
    pixels only), with the pixel accuracy and the mean IoU over the classes that occur."""
    parts = list(pairs)
    if not parts:
        return None
    target = np.concatenate([t.reshape(-1) for t, _ in parts]).astype(np.int64)
    pred = np.concatenate([p.reshape(-1) for _, p in parts]).astype(np.int64)
    if isinstance(classes, int) and classes > 0:
        n = classes
    else:
        n = int(max(target.max(initial=0), pred.max(initial=0)) + 1)
    ok = (target >= 0) & (target < n) & (pred >= 0) & (pred < n)
    target, pred = target[ok], pred[ok]
    hits = np.bincount(target[target == pred], minlength=n)
    in_target, in_pred = np.bincount(target, minlength=n), np.bincount(pred, minlength=n)
    union = in_target + in_pred - hits
    shown = np.flatnonzero(union > 0)
    if shown.size > MAX_IOU_CLASSES:  # the classes with the most pixels, in class order
        shown = np.sort(shown[np.argsort(-in_target[shown], kind="stable")[:MAX_IOU_CLASSES]])
    labels = names if isinstance(names, list) else []
    iou = hits[shown] / union[shown]
    return {
        "classes": shown.tolist(),
        "names": [label(labels, int(c)) for c in shown],
        "iou": iou.tolist(),
        "pixels": in_target[shown].tolist(),
        "mean_iou": float(iou.mean()) if iou.size else None,
        "accuracy": float((target == pred).mean()) if target.size else None,
        "total": int(target.size),
    }
