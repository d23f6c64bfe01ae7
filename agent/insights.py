"""The insight methods of the agent API: a sample's data pipeline, per-sample and
per-token tables, the loss in detail, Grad-CAM, attention and rollout, and PCA of
representations and embedding tables (see PROTOCOL.md).

Each reads what ``tvis/record`` wrote for a batch (the ``data``, ``tokens``, ``loss``,
``gradcam``, ``attention`` and ``repr`` sections, the run's ``data`` info) and replies
with what one screen shows: pictures shrunk to the size asked for, maps downsampled,
tables paged. ``InsightsAPI`` is mixed into ``AgentAPI``, whose store and lookups it uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent import insight_views as iv
from tvis.agent import views
from tvis.agent.calltree import CallTree
from tvis.agent.decode import Vocabulary
from tvis.agent.dispatch import rpc
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError
from tvis.agent.samples import model_input
from tvis.agent.store import _LRU
from tvis.store.reader import Chunk
from tvis.store.schema import LossCurve, ReductionCheck

# Stages listed for one sample: a pipeline is a handful; a loop calling a traced helper
# per pixel is not a pipeline a person reads stage by stage.
MAX_STAGES = 32
# Token ids shown per tensor or text in a pipeline reply.
MAX_TOKENS = 512
# Values of the per-element loss sent at once: a screen of tokens colours a few thousand.
MAX_ELEMENTS = 65536
# Classes in a confusion matrix: beyond this the most frequent are kept.
MAX_CONFUSION = 256
# Points in one PCA reply: a terminal scatter shows far fewer.
MAX_POINTS = 20000
# Run-wide views (confusion, PCA across batches) read every batch once; these many stay cached.
RUN_VIEW_CACHE = 16


class InsightsAPI:
    """Insight methods; expects ``store`` (a RunStore), ``_tree`` and ``_normalize`` from
    the class it is mixed into."""

    @property
    def _run_views(self) -> _LRU:
        # Created on first use: the API class it is mixed into owns __init__.
        cache = self.__dict__.get("_insight_views")
        if cache is None:
            cache = self.__dict__.setdefault("_insight_views", _LRU(RUN_VIEW_CACHE))
        return cache

    # -- which pages apply -------------------------------------------------------------

    @rpc
    def insights(self, run: str) -> dict[str, Any]:
        """Which insight pages apply to ``run``, and the layers each can show."""
        index = self.store.index(run)
        found = (index.get("data") or {}).get("insights")
        if not isinstance(found, dict):
            found = self._insights_from_batch(run, index)
        gradcam = _names(found.get("gradcam"))
        attention = _names(found.get("attention"))
        reprs = _names(found.get("repr"))
        tables = [t for t in found.get("embeddings") or [] if isinstance(t, dict)]
        return {
            "gradcam": bool(gradcam),
            "attention": bool(attention),
            "embeddings": bool(reprs or tables),
            "gradcam_layers": gradcam,
            "attention_layers": attention,
            "repr_layers": reprs,
            "tables": tables,
        }

    def _insights_from_batch(self, run: str, index: dict[str, Any]) -> dict[str, Any]:
        """The insights of a run recorded before they were noted in its index."""
        batches = _training_batches(index)
        if not batches:
            return {}
        record = self.store.chunk(run, "batch", batches[0]).record
        return {
            "gradcam": [g.get("layer") for g in _section_list(record, "gradcam")],
            "attention": [a.get("module") for a in _section_list(record, "attention")],
            "repr": [r.get("module") for r in _section_list(record, "repr")],
        }

    # -- data pipeline -----------------------------------------------------------------

    @rpc
    def pipeline(
        self, run: str, batch: int, sample: int = 0, width: int = 48, height: int = 48
    ) -> dict[str, Any]:
        """One sample's way into the model: its dataset index, the raw item (picture or
        text), each stage's output, the tokenizer's tokens, and the model input."""
        views.check_size(width, height)
        chunk = self.store.chunk(run, "batch", batch)
        tree = self._tree(run, batch)
        data = self.store.index(run).get("data") or {}
        record = chunk.record
        section = record.get("data") if isinstance(record.get("data"), dict) else {}
        size = (record.get("batch") or {}).get("batch_size")
        if sample < 0 or (isinstance(size, int) and sample >= size):
            raise AgentError(f"batch {batch} has no sample {sample}.", NOT_FOUND)
        render = _Renderer(chunk, tree, data, width, height, size)
        calls = item_calls(tree, section, sample)
        raw = next((r for r in (_raw_of(render, tree.by_id[c]) for c in calls) if r), None)
        stages = []
        seen: set[int] = set()
        for cid in returned_order(tree, calls):  # a stage's output exists once it returns
            stage = _stage(render, tree.by_id[cid], seen)
            if stage is not None and len(stages) < MAX_STAGES:
                stages.append(stage)
        indices = section.get("indices") if isinstance(section.get("indices"), list) else []
        given = model_input(record, tree)
        return {
            "sample": sample,
            "index": indices[sample] if sample < len(indices) else None,
            "raw": raw,
            "stages": stages,
            "tokens": _item_tokens(record, set(calls), sample),
            "input": render.model_input(given, sample) if given else None,
        }

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
        for a language model's ``sample``, one row per token with the decoded texts."""
        if offset < 0 or limit < 0:
            raise AgentError("offset and limit must be 0 or more.", BAD_REQUEST)
        chunk = self.store.chunk(run, "batch", batch)
        loss = _loss_section(chunk)
        data = self.store.index(run).get("data") or {}
        table = _LossArrays(chunk, loss, (chunk.record.get("batch") or {}).get("batch_size"))
        if table.per_token:
            if sample is None:
                rows = table.sequence_rows(Vocabulary(data))
                return {"kind": "sequences", "total": len(rows), "rows": _page(rows, offset, limit)}
            given = model_input(chunk.record, self._tree(run, batch))
            result = table.token_rows(sample, Vocabulary(data), _input_ids(chunk, given, sample))
            rows = result.pop("rows")
            return {**result, "total": len(rows), "rows": _page(rows, offset, limit)}
        rows = table.sample_rows(data.get("classes"))
        return {"kind": "samples", "total": len(rows), "rows": _page(rows, offset, limit)}

    def _sequence_columns(self, chunk: Chunk, vocab: Vocabulary, table: dict[str, Any]) -> None:
        """A language model's ``samples`` rows gain each sequence's mean loss, target and
        predicted text, token accuracy and worst token; ``vocabulary`` says why not text."""
        loss = _loss_section(chunk, required=False)
        arrays = _LossArrays(chunk, loss, table.get("batch_size"))
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
        table["vocabulary"] = vocab.why

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
        chunk = self.store.chunk(run, "batch", batch)
        loss = _loss_section(chunk)
        tree = self._tree(run, batch)
        size = (chunk.record.get("batch") or {}).get("batch_size")
        table = _LossArrays(chunk, loss, size)
        call = tree.by_id.get(loss.get("call"))
        result: dict[str, Any] = {
            key: loss.get(key)
            for key in ("fn", "reduction", "ignore_index", "label_smoothing", "value", "merged")
        }
        result["call"] = (
            {k: call.get(k) for k in ("id", "name", "cls", "kind", "site", "def")} if call else None
        )
        result["per_token"] = table.per_token
        result["tokens_per_sample"] = loss.get("tokens_per_sample")
        if not 0 <= elements <= MAX_ELEMENTS:
            raise AgentError(f"elements must be 0 to {MAX_ELEMENTS}.", BAD_REQUEST)
        result.update(table.elements(elements))
        result["hist"] = table.histogram()
        result["residual_hist"] = table.residual_histogram(loss.get("fn"))
        result["reduction_check"] = table.reduction_check()
        result["worst"] = table.worst(limit)
        if confusion and not table.per_token and table.has("target", "pred"):
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
        batches = tuple(_training_batches(index))
        names = (index.get("data") or {}).get("classes")

        def build() -> dict[str, Any] | None:
            pairs = []
            for b in batches:
                chunk = self.store.chunk(run, "batch", b)
                size = (chunk.record.get("batch") or {}).get("batch_size")
                arrays = _LossArrays(chunk, _loss_section(chunk, required=False), size)
                if not arrays.per_token and arrays.has("target", "pred"):
                    pairs.append((arrays.values("target"), arrays.values("pred")))
            return _confusion_matrix(pairs, classes, names)

        key = (str(self.store.run_path(run)), "confusion", batches, _stamp(index))
        result = self._run_views.get(key, build)
        return None if result is None else {**result, "batches": list(batches)}

    # -- Grad-CAM ----------------------------------------------------------------------

    @rpc
    def gradcam(
        self,
        run: str,
        batch: int,
        sample: int = 0,
        layer: str | None = None,
        which: str = "pred",
        blend: bool = False,
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """A Grad-CAM map for one sample, conv layer and class choice (``pred`` or
        ``true``), resized onto the input picture and scaled to [0, 1]; with ``blend``,
        also the picture with the map laid over it in heat colours."""
        views.check_size(width, height)
        chunk = self.store.chunk(run, "batch", batch)
        maps = _section_list(chunk.record, "gradcam")
        if not maps:
            raise AgentError(f"batch {batch} has no Grad-CAM maps.", NOT_FOUND)
        layers = list(dict.fromkeys(m.get("layer") for m in maps))
        layer = layer if layer is not None else layers[-1]
        choice = next(
            (m for m in maps if m.get("layer") == layer and m.get("which") == which), None
        )
        if choice is None:
            raise AgentError(
                f"no Grad-CAM for layer {layer!r} and class {which!r}; layers: {layers}.",
                NOT_FOUND,
            )
        cams = self._values(chunk, chunk.tensor(choice["tensor"]))
        cam = views.take_sample(cams, 0, sample).astype(np.float64)
        given = model_input(chunk.record, self._tree(run, batch))
        picture = None
        if given is not None and len(given.get("shape") or []) == 4:
            values = chunk.array(given["id"])
            if values is not None and sample < values.shape[0]:
                picture = views.picture(values[sample], self._normalize(run), width, height)
        out_h, out_w = picture["array"].shape[:2] if picture else _fit(cam.shape, height, width)
        peak = float(cam.max()) if cam.size else 0.0
        unit = iv.resize(cam / peak if peak > 0 else cam, out_h, out_w)
        loss = chunk.record.get("loss") if isinstance(chunk.record.get("loss"), dict) else {}
        cls = _class_of(chunk, loss, which, sample)
        names = (self.store.index(run).get("data") or {}).get("classes") or []
        return {
            "layers": layers,
            "layer": layer,
            "which": which,
            "choices": [m.get("which") for m in maps if m.get("layer") == layer],
            "sample": sample,
            "class": cls,
            "class_name": names[cls] if isinstance(cls, int) and 0 <= cls < len(names) else None,
            "approximate": bool(choice.get("approximate")),
            "map": unit,
            "peak": peak,
            "map_shape": list(cam.shape),
            "image": picture["array"] if picture else None,
            "blend": iv.blend(picture["array"], unit) if picture and blend else None,
        }

    # -- attention ---------------------------------------------------------------------

    @rpc
    def attention(
        self,
        run: str,
        batch: int,
        layer: int = 0,
        head: int | None = None,
        sample: int = 0,
        rollout: bool = False,
        width: int = 128,
        height: int = 128,
    ) -> dict[str, Any]:
        """One layer's attention map for a sample (one head, or the mean of the heads), or
        the rollout through every layer, with token labels on both axes."""
        views.check_size(width, height)
        chunk = self.store.chunk(run, "batch", batch)
        found = _section_list(chunk.record, "attention")
        if not found:
            raise AgentError(f"batch {batch} has no attention weights.", NOT_FOUND)
        if not 0 <= layer < len(found):
            raise AgentError(f"layer must be between 0 and {len(found) - 1}.", BAD_REQUEST)
        if rollout:
            maps = [self._attention_map(chunk, a, sample, None) for a in found]
            if len({m.shape for m in maps}) != 1 or maps[0].shape[0] != maps[0].shape[1]:
                raise AgentError(
                    "rollout needs square maps of one size in every layer.", BAD_REQUEST
                )
            square = iv.rollout(maps)
        else:
            square = self._attention_map(chunk, found[layer], sample, head)
        small = views.block_mean(square, height, width)
        tokens = self._token_labels(run, chunk, batch, sample, square.shape[-1])
        shown = small.shape == square.shape
        return {
            "layers": [a.get("module") for a in found],
            "layer": layer,
            "module": found[layer].get("module"),
            "heads": found[layer].get("heads"),
            "head": head,
            "sample": sample,
            "rollout": rollout,
            "map": small,
            "shape": list(square.shape),
            "downsampled": not shown,
            "tokens": tokens.get("tokens") if shown else None,
            "grid": tokens.get("grid"),
        }

    def _attention_map(self, chunk: Chunk, found: dict, sample: int, head: int | None):
        values = self._values(chunk, chunk.tensor(found["tensor"]))
        one = views.take_sample(values, 0, sample).astype(np.float64)
        if one.ndim == 2:
            return one
        if head is None:
            return one.mean(axis=0)
        if not 0 <= head < one.shape[0]:
            raise AgentError(f"head must be between 0 and {one.shape[0] - 1}.", BAD_REQUEST)
        return one[head]

    def _token_labels(self, run: str, chunk: Chunk, batch: int, sample: int, n: int) -> dict:
        given = model_input(chunk.record, self._tree(run, batch))
        if given is not None and len(given.get("shape") or []) == 4:
            return {"grid": iv.patch_grid(n)}
        ids = _input_ids(chunk, given, sample)
        vocab = (self.store.index(run).get("data") or {}).get("vocab")
        if ids is not None and len(ids) == n:
            return {"tokens": [_token(vocab, i) for i in ids]}
        return {}

    # -- embeddings --------------------------------------------------------------------

    @rpc
    def embeddings(
        self,
        run: str,
        layer: str | None = None,
        table: str | None = None,
        step: int | None = None,
        max_points: int = 4000,
    ) -> dict[str, Any]:
        """PCA of every captured sample's representation at ``layer`` (across all training
        batches, coloured by class), or with ``table``, of an ``nn.Embedding``'s rows at a
        step (the last by default), labelled with the vocabulary."""
        if not 1 <= max_points <= MAX_POINTS:
            raise AgentError(f"max_points must be between 1 and {MAX_POINTS}.", BAD_REQUEST)
        found = self.insights(run)
        if table is not None:
            return self._table_pca(run, found["tables"], table, step, max_points)
        layers = found["repr_layers"]
        if not layers:
            raise AgentError("this run recorded no per-sample representations.", NOT_FOUND)
        layer = layer if layer is not None else layers[-1]
        index = self.store.index(run)
        batches = tuple(_training_batches(index))
        key = (str(self.store.run_path(run)), "repr", layer, batches, _stamp(index))
        points, labels = self._run_views.get(key, lambda: self._gather_repr(run, layer, batches))
        if points is None:
            raise AgentError(f"no representation of layer {layer!r} was recorded.", NOT_FOUND)
        projected, ratio = iv.pca(points)
        keep = slice(0, max_points)
        names = (index.get("data") or {}).get("classes")
        return {
            "kind": "repr",
            "layers": layers,
            "layer": layer,
            "points": projected[keep],
            "labels": labels[keep] if labels is not None else None,
            "label_names": names if isinstance(names, list) else None,
            "explained": ratio,
            "total": int(points.shape[0]),
            "batches": list(batches),
        }

    def _gather_repr(self, run: str, layer: str, batches: tuple[int, ...]):
        rows, labels = [], []
        for b in batches:
            chunk = self.store.chunk(run, "batch", b)
            entry = next(
                (r for r in _section_list(chunk.record, "repr") if r.get("module") == layer), None
            )
            values = chunk.array(entry["tensor"]) if entry else None
            if values is None:
                continue
            values = np.asarray(values, dtype=np.float32).reshape(values.shape[0], -1)
            rows.append(values)
            arrays = _LossArrays(chunk, _loss_section(chunk, required=False), values.shape[0])
            target = arrays.values("target") if not arrays.per_token else None
            ok = target is not None and target.shape[0] == values.shape[0]
            labels.append(target.astype(np.int32) if ok else np.full(values.shape[0], -1, np.int32))
        if not rows or len({r.shape[1] for r in rows}) != 1:
            return None, None
        stacked = np.concatenate(labels)
        return np.concatenate(rows), (stacked if (stacked >= 0).any() else None)

    def _table_pca(self, run: str, tables: list, table: str, step: int | None, max_points: int):
        info = next((t for t in tables if table in (t.get("module"), t.get("param"))), None)
        param = info.get("param") if info else table
        steps = self.store.reader(run).step_ids()
        if not steps:
            raise AgentError("this run has no optimizer step with parameter values.", NOT_FOUND)
        step = steps[-1] if step is None else step
        chunk = self.store.chunk(run, "step", step)
        record = next((p for p in chunk.record.get("params") or [] if p.get("name") == param), None)
        if record is None or not isinstance(record.get("weight"), int):
            raise AgentError(f"step {step} has no weights of {param!r}.", NOT_FOUND)
        weight = self._values(chunk, chunk.tensor(record["weight"]))
        if weight.ndim != 2:
            raise AgentError(f"{param!r} is not a table of row vectors.", BAD_REQUEST)
        rows = weight[:max_points]
        projected, ratio = iv.pca(rows)
        vocab = (self.store.index(run).get("data") or {}).get("vocab")
        full_rows = (info or {}).get("rows") or weight.shape[0]
        labelled = isinstance(vocab, list) and len(vocab) == full_rows
        return {
            "kind": "table",
            "table": (info or {}).get("module") or table,
            "param": param,
            "step": step,
            "points": projected,
            "tokens": [_token(vocab, i) for i in range(rows.shape[0])]
            if labelled
            else [str(i) for i in range(rows.shape[0])],
            "vocab": labelled,
            "explained": ratio,
            "total": int(full_rows),
            "stored_rows": int(weight.shape[0]),
        }


# -- reading a batch's sections -----------------------------------------------------------


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _section_list(record: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = record.get(name)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _training_batches(index: dict[str, Any]) -> list[int]:
    return [
        b["index"]
        for b in index.get("batches") or []
        if isinstance(b, dict) and isinstance(b.get("index"), int) and not b.get("light")
    ]


def _stamp(index: dict[str, Any]) -> int:
    """Changes when a run still being recorded gains a batch (keys run-wide caches)."""
    return len(index.get("batches") or [])


def _loss_section(chunk: Chunk, required: bool = True) -> dict[str, Any]:
    loss = chunk.record.get("loss")
    if isinstance(loss, dict):
        return loss
    if required:
        raise AgentError(f"{chunk.what} has no recorded loss call.", NOT_FOUND)
    return {}


def _page(rows: list, offset: int, limit: int) -> list:
    return rows[offset : offset + min(limit, MAX_ELEMENTS)]


def _token(vocab: Any, i: Any) -> str:
    if isinstance(vocab, list) and isinstance(i, int) and 0 <= i < len(vocab):
        return vocab[i]
    return f"<{i}>"


def _fit(shape: tuple, height: int, width: int) -> tuple[int, int]:
    h, w = shape[-2:]
    factor = max(-(-h // height), -(-w // width), 1)
    return -(-h // factor), -(-w // factor)


def _class_of(chunk: Chunk, loss: dict, which: str, sample: int) -> int | None:
    key = "pred" if which == "pred" else "target"
    if not isinstance(loss.get(key), int) or loss.get("shape") is None:
        return None
    values = chunk.array(loss[key])
    if values is None or values.ndim != 1 or sample >= values.shape[0]:
        return None
    return int(values[sample])


def _input_ids(chunk: Chunk, given: dict | None, sample: int) -> list[int] | None:
    """The token ids a language model received for ``sample``, when they were kept."""
    shape = (given or {}).get("shape") or []
    if len(shape) != 2 or not str(given.get("dtype", "")).startswith(("int", "uint")):
        return None
    values = chunk.array(given["id"])
    if values is None or sample >= values.shape[0]:
        return None
    return [int(v) for v in values[sample]]


class _LossArrays:
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
        return _hist(self.valid_elements())

    def residual_histogram(self, fn: Any) -> dict[str, Any] | None:
        """|input − target| per element for the regression losses whose elements give it
        exactly (``mse_loss``: √loss, ``l1_loss``: loss); its sign is not recorded."""
        values = self.valid_elements()
        if values is None or fn not in ("mse_loss", "l1_loss"):
            return None
        return _hist(np.sqrt(np.maximum(values, 0)) if fn == "mse_loss" else np.abs(values))

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
        total = float(values.sum())
        weight_sum = self.loss.get("weight_sum")
        if reduction == "sum":
            divisor = 1.0
        elif isinstance(weight_sum, (int, float)):
            divisor = float(weight_sum)
        else:
            divisor = float(values.size)
        computed = total / divisor if divisor else float("nan")
        shape = (self.chunk.tensor(self.loss["per_element"]) or {}).get("shape")
        complete = not shape or int(np.prod(per_element.shape)) == int(np.prod(shape))
        return {
            "reduction": reduction,
            "terms": int(values.size),
            "sum": total,
            "divisor": divisor,
            "weighted": isinstance(weight_sum, (int, float)),
            "computed": computed,
            "recorded": float(recorded),
            # float32 sums in torch against a float64 sum here: agree to a few ulps per term
            "matches": bool(np.isclose(computed, recorded, rtol=1e-4, atol=1e-6))
            if complete
            else None,
            "complete": complete,
        }

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
                    row[f"{key}_name"] = _label(names, row[key])
            if columns["p_target"] is not None and i < columns["p_target"].shape[0]:
                row["p_target"] = float(columns["p_target"][i])
            if "target" in row and "pred" in row:
                row["correct"] = row["target"] == row["pred"]
            ti, tp = columns["top_i"], columns["top_p"]
            if ti is not None and tp is not None and i < ti.shape[0]:
                row["top"] = [
                    {"class": int(c), "name": _label(names, int(c)), "p": float(p)}
                    for c, p in zip(ti[i], tp[i], strict=True)
                ]
            rows.append(row)
        return rows

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
                mask = _mask(valid, i, target.shape[1])
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
        self, sample: int, vocab: Vocabulary, inputs: list[int] | None
    ) -> dict[str, Any]:
        """One row per position of ``sample``: input, target, prediction, p(target), loss,
        padding; and the input, target and predicted texts decoded with the vocabulary."""
        columns = {k: self.by_sample(k) for k in ("target", "pred", "p_target", "per_element")}
        target = columns["target"]
        if target is None or not 0 <= sample < target.shape[0]:
            raise AgentError(f"sample {sample} has no per-token targets recorded.", NOT_FOUND)
        per_element = self.values("per_element")
        if per_element is not None and per_element.size == target.size:
            columns["per_element"] = per_element.reshape(target.shape)
        mask = _mask(self.by_sample("valid"), sample, target.shape[1])
        rows = []
        for pos in range(target.shape[1]):
            row: dict[str, Any] = {"pos": pos, "pad": not bool(mask[pos])}
            if inputs is not None and pos < len(inputs):
                row["input"] = inputs[pos]
                row["input_token"] = vocab.token(inputs[pos])
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
                "input": vocab.text(inputs) if inputs is not None else None,
                "target": vocab.text([r["target"] for r in real]),
                "pred": vocab.text([r["pred"] for r in real if "pred" in r]),
            },
            "vocabulary": vocab.why,
            "accuracy": len(hits) / len(real) if real else None,
            "rows": rows,
        }


# Bins of the loss page's histograms: the recorder's tensor histograms use as many.
HIST_BINS = 32


def _hist(values: np.ndarray | None) -> dict[str, Any] | None:
    if values is None:
        return None
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    counts, _ = np.histogram(finite, bins=HIST_BINS, range=(lo, hi if hi > lo else lo + 1))
    return {"counts": counts.tolist(), "lo": lo, "hi": hi}


def _mask(valid: np.ndarray | None, sample: int, length: int) -> np.ndarray:
    if valid is None or sample >= valid.shape[0]:
        return np.ones(length, dtype=bool)
    return valid[sample].reshape(-1).astype(bool)


def _label(names: list, i: int) -> str | None:
    return names[i] if 0 <= i < len(names) else None


def _confusion_matrix(pairs: list, classes: Any, names: Any) -> dict[str, Any] | None:
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
        "names": [_label(labels, int(c)) for c in shown],
        "samples": int(target.size),
        "accuracy": float((target == pred).mean()) if target.size else None,
    }


# -- a sample's pipeline ------------------------------------------------------------------


def item_calls(tree: CallTree, section: dict[str, Any], sample: int) -> list[int]:
    """The calls recorded while the sample's dataset item was fetched, in call order."""
    items = section.get("items") if isinstance(section.get("items"), list) else []
    if sample < len(items) and isinstance(items[sample], dict):
        first, end = (items[sample].get("calls") or [0, 0])[:2]
        return [cid for cid in tree.order if first <= cid < end]
    # Without item marks: the sample's own root call of the data phase (dataset[i]).
    roots = [
        cid
        for cid in tree.children.get(-1, [])
        if tree.by_id[cid].get("phase") == "data"
        and str(tree.by_id[cid].get("name", "")).endswith("__getitem__")
    ]
    if sample >= len(roots):
        return []
    return _subtree(tree, roots[sample])


def returned_order(tree: CallTree, calls: list[int]) -> list[int]:
    """``calls`` (a pre-order run of the tree) in the order they returned: children first."""
    inside = set(calls)
    out: list[int] = []

    def visit(cid: int) -> None:
        for child in tree.children.get(cid, []):
            if child in inside:
                visit(child)
        out.append(cid)

    for cid in calls:
        if tree.parent.get(cid, -1) not in inside:
            visit(cid)
    return out


def _subtree(tree: CallTree, root: int) -> list[int]:
    out, stack = [], [root]
    while stack:
        cid = stack.pop()
        out.append(cid)
        stack.extend(reversed(tree.children.get(cid, [])))
    return out


def _item_tokens(record: dict[str, Any], calls: set[int], sample: int) -> list[dict[str, Any]]:
    """The tokenizer's texts and tokens for the sample: calls made while fetching it, or
    the sample's row of a call that tokenized the whole batch."""
    out = []
    for found in _section_list(record, "tokens"):
        texts, ids, tokens = (found.get(k) or [] for k in ("texts", "ids", "tokens"))
        if found.get("call") in calls:
            row = 0
        elif found.get("item") is None and len(ids) > sample:
            row = sample
        else:
            continue
        if row < len(ids):
            out.append(
                {
                    "call": found.get("call"),
                    "text": texts[row] if row < len(texts) else None,
                    "ids": ids[row][:MAX_TOKENS],
                    "tokens": tokens[row][:MAX_TOKENS] if row < len(tokens) else [],
                }
            )
    return out


def _raw_of(render: _Renderer, call: dict[str, Any]) -> dict[str, Any] | None:
    """The raw item: the first picture or text a call of the item took or returned."""
    for arg in (call.get("inputs") or []) + (call.get("outputs") or []):
        if isinstance(arg, dict) and ("image" in arg or "text" in arg):
            return render.value(arg)
    return None


def stage_output(call: dict[str, Any], seen: set[int]) -> dict[str, Any] | None:
    """The argument that makes ``call`` one stage of a pipeline: its first output that is a
    new picture, tensor or text (``seen`` collects the tensors already shown). None for
    compositions (``Compose``; their stages are listed) and calls with nothing new."""
    if "Compose" in f"{call.get('cls') or ''}{call.get('name') or ''}":
        return None
    for arg in call.get("outputs") or []:
        if not isinstance(arg, dict):
            continue
        key = arg.get("tensor", arg.get("image"))
        if key is None and "text" not in arg:
            continue
        if isinstance(key, int):
            if key in seen:
                return None
            seen.add(key)
        return arg
    return None


def _stage(render: _Renderer, call: dict[str, Any], seen: set[int]) -> dict[str, Any] | None:
    """One stage of the pipeline with its output rendered (see ``stage_output``)."""
    arg = stage_output(call, seen)
    if arg is None:
        return None
    return {
        "call": call.get("id"),
        "name": call.get("name"),
        "kind": call.get("kind"),
        "output": render.value(arg),
    }


class _Renderer:
    """Turns recorded values (pictures, tensors, texts) into small reply values."""

    def __init__(
        self, chunk: Chunk, tree: CallTree, data: dict, width: int, height: int, size: Any
    ) -> None:
        self.chunk = chunk
        self.batch_size = size
        self.tree = tree
        self.vocab = data.get("vocab")
        self.normalize = data.get("normalize")
        self.width = width
        self.height = height

    def value(self, arg: dict[str, Any]) -> dict[str, Any]:
        if "text" in arg:
            return {"kind": "text", "text": arg["text"]}
        if "repr" in arg:
            return {"kind": "value", "repr": arg["repr"]}
        entry = self.tree.tensor(arg.get("image", arg.get("tensor")))
        if entry is None:
            return {"kind": "missing"}
        values = self.chunk.array(entry["id"])
        return self._tensor(entry, values, normalize=None)

    def model_input(self, entry: dict[str, Any], sample: int) -> dict[str, Any]:
        values = self.chunk.array(entry["id"])
        batch_dim = entry.get("batch_dim")
        if batch_dim is None and values is not None and values.ndim:
            # The collated batch is [B, ...] even where the recorder met it before it knew B.
            batch_dim = 0 if values.ndim == 4 or values.shape[0] == self.batch_size else None
        if values is not None and batch_dim is not None and sample < values.shape[batch_dim]:
            values = np.take(values, sample, axis=batch_dim)
        elif values is not None:
            values = None
        return self._tensor(entry, values, normalize=self.normalize)

    def _tensor(self, entry: dict, values: np.ndarray | None, normalize: Any) -> dict[str, Any]:
        base = {"tensor": entry["id"], "shape": entry.get("shape"), "dtype": entry.get("dtype")}
        if values is None:
            return {"kind": "tensor", **base, "stats": entry.get("stats")}
        if entry.get("raw_image") or _image_like(values):
            picture = views.picture(values, normalize, self.width, self.height)
            return {"kind": "image", **base, **picture}
        if values.ndim == 1 and values.dtype.kind in "iu":
            ids = [int(v) for v in values[:MAX_TOKENS]]
            tokens = [_token(self.vocab, i) for i in ids] if isinstance(self.vocab, list) else None
            return {"kind": "ids", **base, "ids": ids, "tokens": tokens}
        return {"kind": "tensor", **base, "stats": entry.get("stats")}


def _image_like(values: np.ndarray) -> bool:
    if values.ndim == 3:
        return values.shape[0] in (1, 3) or values.shape[-1] in (1, 3, 4)
    return values.ndim == 2 and values.dtype.kind == "f" and min(values.shape) >= 8
