"""The Replay page's agent method ``pipeline``: one sample's way into the model, from the
raw item through each transform stage and the tokenizer to the collated model input."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent import views
from tvis.agent.calltree import CallTree
from tvis.agent.decode import Vocabulary
from tvis.agent.dispatch import rpc
from tvis.agent.insights.common import InsightBase, section_list
from tvis.agent.protocol import NOT_FOUND, AgentError, require_non_negative
from tvis.agent.samples import model_input
from tvis.store.reader import Chunk

# Stages listed for one sample: a pipeline is a handful; a loop calling a traced helper
# per pixel is not a pipeline a person reads stage by stage.
MAX_STAGES = 32
# Token ids shown per tensor or text in a pipeline reply.
MAX_TOKENS = 512


class PipelineAPI(InsightBase):
    """``pipeline``."""

    @rpc
    def pipeline(
        self, run: str, batch: int, sample: int = 0, width: int = 48, height: int = 48
    ) -> dict[str, Any]:
        """One sample's way into the model: its dataset index, the raw item (picture or
        text), each stage's output, the tokenizer's tokens, and the model input."""
        require_non_negative(sample=sample)
        views.check_size(width, height)
        chunk = self.store.chunk(run, "batch", batch)
        tree = self.lookups.tree(run, batch)
        data = self.store.index(run).get("data") or {}
        record = chunk.record
        section_given = record.get("data")
        section: dict[str, Any] = section_given if isinstance(section_given, dict) else {}
        size = (record.get("batch") or {}).get("batch_size")
        if isinstance(size, int) and sample >= size:
            raise AgentError(f"batch {batch} has no sample {sample}.", NOT_FOUND)
        render = _Renderer(chunk, tree, data, width, height, size)
        calls = item_calls(tree, section, sample)
        raw = next((r for r in (_raw_of(render, tree.by_id[c]) for c in calls) if r), None)
        stages: list[dict[str, Any]] = []
        seen: set[int] = set()
        for cid in returned_order(tree, calls):  # a stage's output exists once it returns
            stage = _stage(render, tree.by_id[cid], seen)
            if stage is not None and len(stages) < MAX_STAGES:
                stages.append(stage)
        indices_given = section.get("indices")
        indices: list[Any] = indices_given if isinstance(indices_given, list) else []
        given = model_input(record, tree)
        return {
            "sample": sample,
            "index": indices[sample] if sample < len(indices) else None,
            "raw": raw,
            "stages": stages,
            "tokens": _item_tokens(record, set(calls), sample),
            "input": render.model_input(given, sample) if given else None,
        }


def item_calls(tree: CallTree, section: dict[str, Any], sample: int) -> list[int]:
    """The calls recorded while the sample's dataset item was fetched, in call order."""
    items_given = section.get("items")
    items: list[Any] = items_given if isinstance(items_given, list) else []
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
    """``calls`` (a pre-order run of the tree) in the order they returned: each after every
    call of ``calls`` made under it, however deep (a project function's layers under a
    container it called, which is not in ``calls``, return before it)."""
    inside = set(calls)
    under: dict[int, list[int]] = {-1: []}  # each call's nearest enclosing call of ``calls``
    for cid in calls:  # pre-order: each list keeps the order its calls began
        up, climbed = tree.parent.get(cid, -1), 0
        while up != -1 and up not in inside and climbed < len(tree.order):  # a corrupt cycle
            up, climbed = tree.parent.get(up, -1), climbed + 1
        under.setdefault(up if up in inside else -1, []).append(cid)
    out: list[int] = []

    def visit(cid: int) -> None:
        for child in under.get(cid, []):
            visit(child)
        out.append(cid)

    for cid in under[-1]:
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
    for found in section_list(record, "tokens"):
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
        self.vocab = Vocabulary(data)
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
            if not self.vocab.known:
                return {"kind": "ids", **base, "ids": ids, "tokens": None}
            tokens = [self.vocab.token(i) for i in ids]
            return {
                "kind": "ids",
                **base,
                "ids": ids,
                "tokens": tokens,
                "text": self.vocab.text(ids),
            }
        return {"kind": "tensor", **base, "stats": entry.get("stats")}


def _image_like(values: np.ndarray) -> bool:
    if values.ndim == 3:
        return values.shape[0] in (1, 3) or values.shape[-1] in (1, 3, 4)
    return values.ndim == 2 and values.dtype.kind == "f" and min(values.shape) >= 8
