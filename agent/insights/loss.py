"""The Loss page's agent methods: per-sample and per-token tables, the loss call and how
it reduces, the loss across the run, the worst samples, and a confusion matrix over every
captured batch."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent import insight_views as iv
from tvis.agent.decode import Vocabulary, class_names, source_vocabulary
from tvis.agent.dispatch import rpc
from tvis.agent.insights.common import (
    InsightBase,
    input_ids,
    loss_section,
    stamp,
    training_batches,
)
from tvis.agent.insights.loss_arrays import MAX_ELEMENTS, LossArrays, label
from tvis.agent.insights.loss_ctc import ctc_columns, ctc_summary
from tvis.agent.insights.loss_pixels import PixelArrays, iou_table
from tvis.agent.protocol import BAD_REQUEST, AgentError, require_non_negative
from tvis.agent.samples import model_input
from tvis.store.reader import Chunk
from tvis.store.schema import LossCurve

# Classes in a confusion matrix: beyond this the most frequent are kept.
MAX_CONFUSION = 256


class LossAPI(InsightBase):
    """``sample_table``, ``loss_detail`` and ``loss_curve``."""

    # -- per-sample and per-token tables -----------------------------------------------

    @rpc
    def sample_table(
        self,
        run: str,
        batch: int,
        sample: int | None = None,
        offset: int = 0,
        limit: int = 200,
    ) -> dict[str, Any]:
        """Per-sample rows (loss, target, prediction, p(target), top-k with class names), or
        for a language model's ``sample``, one row per token with the decoded texts, or for
        a segmentation loss's ``sample``, its masks and per-pixel loss as pictures."""
        require_non_negative(sample=sample, offset=offset, limit=limit)
        chunk = self.store.chunk(run, "batch", batch)
        loss = loss_section(chunk)
        data = self.store.index(run).get("data") or {}
        table = LossArrays(chunk, loss, (chunk.record.get("batch") or {}).get("batch_size"))
        if table.per_token:
            if sample is None:
                rows = table.sequence_rows(Vocabulary(data))
                return {"kind": "sequences", "total": len(rows), "rows": page(rows, offset, limit)}
            tree = self.lookups.tree(run, batch)
            given = model_input(chunk.record, tree)
            source = source_vocabulary(data, tree, given["id"] if given else None)
            result = table.token_rows(
                sample, Vocabulary(data), input_ids(chunk, given, sample), source
            )
            rows = result.pop("rows")
            return {**result, "total": len(rows), "rows": page(rows, offset, limit)}
        if table.spatial:
            pixels = PixelArrays(table)
            if sample is not None:
                return pixels.view(sample, class_names(data, loss))
            rows = pixels.sample_rows()
            return {"kind": "samples", "total": len(rows), "rows": page(rows, offset, limit)}
        rows = table.sample_rows(class_names(data, loss))
        ctc_columns(loss, Vocabulary(data), rows)  # a CTC loss's texts
        picked = {"picked_from": table.picked_from} if table.picked_from else {}
        return {"kind": "samples", "total": len(rows), "rows": page(rows, offset, limit), **picked}

    # -- loss ----------------------------------------------------------------------------

    @rpc
    def loss_detail(
        self,
        run: str,
        batch: int,
        confusion: bool = True,
        limit: int = 64,
        elements: int = MAX_ELEMENTS,
    ) -> dict[str, Any]:
        """The loss call and how it reduces; per-element loss and validity mask; each
        sample's p(target) → −log p → loss, worst first; a confusion matrix over every
        captured batch (classification)."""
        require_non_negative(limit=limit)
        chunk = self.store.chunk(run, "batch", batch)
        loss = loss_section(chunk)
        tree = self.lookups.tree(run, batch)
        size = (chunk.record.get("batch") or {}).get("batch_size")
        table = LossArrays(chunk, loss, size)
        call_id = loss.get("call")
        call = tree.by_id.get(call_id) if isinstance(call_id, int) else None
        result: dict[str, Any] = {
            key: loss.get(key)
            for key in (
                "fn",
                "reduction",
                "ignore_index",
                "label_smoothing",
                "value",
                "merged",
                "per_sample_how",
                "per_sample_why",
                "terms",
                "rest",
                "contrastive",
                "soft_target",
            )
        }
        result["call"] = (
            {k: call.get(k) for k in ("id", "name", "cls", "kind", "site", "def")} if call else None
        )
        # What backward ran on: differs from the call's value when the call is one term of
        # the loss (a sum of losses, a hand-written term) or the loss was scaled.
        result["backward_loss"] = (chunk.record.get("batch") or {}).get("loss")
        result["per_token"] = table.per_token
        result["per_pixel"] = table.spatial
        result["tokens_per_sample"] = loss.get("tokens_per_sample")
        result["picked"] = (
            f"the loss has {table.size} rows where the batch has {table.picked_from} samples "
            "(an index or a mask picked them, or the batch dim is not the first): rows are "
            "numbered within the loss"
            if table.picked_from
            else None
        )
        if not 0 <= elements <= MAX_ELEMENTS:
            raise AgentError(f"elements must be 0 to {MAX_ELEMENTS}.", BAD_REQUEST)
        result.update(table.elements(elements))
        result["hist"] = table.histogram()
        result["hist_of"] = "element" if result["hist"] else None
        if loss.get("fn") == "ctc_loss" and result["hist"]:
            result["hist_of"] = "sample"  # CTC's elements are its samples' alignment sums
        if result["hist"] is None:
            result["hist"] = table.sample_histogram()
            result["hist_of"] = "sample" if result["hist"] else None
        result["residual_hist"] = table.residual_histogram(loss.get("fn"))
        result["reduction_check"] = table.reduction_check()
        result["worst"] = table.worst(limit)
        result["multilabel"] = table.multilabel or None
        if table.multilabel:  # each row's labels set and the model's, beside its loss
            names = class_names(self.store.index(run).get("data"), loss) or []
            for row in result["worst"]:
                sets = table.label_row(row["sample"], names)
                row.update({k: v for k, v in sets.items() if k != "per_label"})
        chars = Vocabulary(self.store.index(run).get("data"))
        result["ctc"] = ctc_summary(loss, chars)
        if result["ctc"]:  # each row's target and greedy transcription beside its loss
            ctc_columns(loss, chars, result["worst"])
        if table.spatial:
            result["iou"] = self._iou(run, chunk, table)
        elif (
            confusion
            and not loss.get("contrastive")  # its targets are batch positions, not classes
            and not table.per_token
            and table.has("target", "pred")
        ):
            result["confusion"] = self._confusion(run, loss.get("classes"))
        return result

    @rpc
    def loss_curve(self, run: str, width: int = 200) -> LossCurve:
        """The loss of every recorded batch in order, decimated to ``width`` columns:
        ``{columns: [{first, last, lo, hi, mean, light}], steps: [{step, batch}] (the
        first batch of each optimizer step), light: [[first, last]] (runs of light batches:
        evaluation, sampling), total, lo, hi}``; a batch without a loss is left out."""
        if not 1 <= width <= 2048:
            raise AgentError("width must be 1 to 2048.", BAD_REQUEST)
        batches = [
            b
            for b in self.store.index(run).get("batches") or []
            if isinstance(b, dict) and isinstance(b.get("index"), int)
        ]
        return iv.loss_curve(batches, width)

    def _confusion(self, run: str, classes: Any) -> dict[str, Any] | None:
        index = self.store.index(run)
        batches = tuple(training_batches(index))
        names = (index.get("data") or {}).get("classes")

        def build() -> dict[str, Any] | None:
            pairs = []
            for b in batches:
                chunk = self.store.chunk(run, "batch", b)
                size = (chunk.record.get("batch") or {}).get("batch_size")
                arrays = LossArrays(chunk, loss_section(chunk, required=False), size)
                if not arrays.per_token and arrays.has("target", "pred"):
                    pairs.append((arrays.values("target"), arrays.values("pred")))
            return confusion_matrix(pairs, classes, names)

        key = (str(self.store.run_path(run)), "confusion", batches, stamp(index))
        result = self.run_views.get(key, build)
        return None if result is None else {**result, "batches": list(batches)}

    def _iou(self, run: str, chunk: Chunk, table: LossArrays) -> dict[str, Any]:
        """Each class's IoU over this batch's valid pixels and over every training batch's."""
        index = self.store.index(run)
        batches = tuple(training_batches(index))
        names = class_names(index.get("data") or {}, table.loss)
        classes = table.loss.get("classes")
        here = PixelArrays(table).pairs()

        def build() -> dict[str, Any] | None:
            pairs = []
            for b in batches:
                other = self.store.chunk(run, "batch", b)
                size = (other.record.get("batch") or {}).get("batch_size")
                arrays = LossArrays(other, loss_section(other, required=False), size)
                found = PixelArrays(arrays).pairs() if arrays.spatial else None
                if found is not None:
                    pairs.append(found)
            return iou_table(pairs, classes, names)

        key = (str(self.store.run_path(run)), "iou", batches, stamp(index))
        whole = self.run_views.get(key, build)
        return {
            "batch": iou_table([here] if here else [], classes, names),
            "run": None if whole is None else {**whole, "batches": list(batches)},
        }


def page(rows: list, offset: int, limit: int) -> list:
    return rows[offset : offset + min(limit, MAX_ELEMENTS)]


def confusion_matrix(pairs: list, classes: Any, names: Any) -> dict[str, Any] | None:
    if not pairs:
        return None
    target = np.concatenate([t.reshape(-1) for t, _ in pairs]).astype(np.int64)
    pred = np.concatenate([p.reshape(-1) for _, p in pairs]).astype(np.int64)
    n = (
        int(classes)
        if isinstance(classes, int) and classes > 0
        else int(max(target.max(), pred.max()) + 1)
    )
    ok = (target >= 0) & (target < n) & (pred >= 0) & (pred < n)
    target, pred = target[ok], pred[ok]
    shown = np.arange(n)
    if n > MAX_CONFUSION:  # the most frequent classes, in class order
        counts = np.bincount(target, minlength=n) + np.bincount(pred, minlength=n)
        shown = np.sort(np.argsort(-counts, kind="stable")[:MAX_CONFUSION])
    position = np.full(n, -1)
    position[shown] = np.arange(shown.size)
    keep = (position[target] >= 0) & (position[pred] >= 0)
    matrix = np.zeros((shown.size, shown.size), dtype=np.int32)
    np.add.at(matrix, (position[target[keep]], position[pred[keep]]), 1)
    labels = names if isinstance(names, list) else []
    return {
        "matrix": matrix,
        "classes": shown.tolist(),
        "names": [label(labels, int(c)) for c in shown],
        "samples": int(target.size),
        "accuracy": float((target == pred).mean()) if target.size else None,
    }


def sequence_columns(chunk: Chunk, vocab: Vocabulary, table: dict[str, Any]) -> None:
    """A language model's ``samples`` rows gain each sequence's mean loss, target and
    predicted text, token accuracy and worst token; ``vocabulary`` says why not text."""
    loss = loss_section(chunk, required=False)
    arrays = LossArrays(chunk, loss, table.get("batch_size"))
    if not arrays.per_token:
        return
    for row, sequence in zip(table["rows"], arrays.sequence_rows(vocab), strict=False):
        row["target_text"] = sequence.get("text")
        for key in ("pred_text", "tokens", "accuracy", "worst"):
            if key in sequence:
                row[key] = sequence[key]
        if sequence.get("loss") is not None:
            row["loss"] = sequence["loss"]
    table["per_token"] = True
    table["vocabulary"] = vocab.note
