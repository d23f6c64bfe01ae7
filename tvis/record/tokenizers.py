"""Tokenizer calls: the raw text, each sample's tokens, and the vocabulary for labels.

Wraps HuggingFace ``tokenizers.Tokenizer.encode``/``encode_batch`` and ``transformers``'
``PreTrainedTokenizerBase.__call__``/``encode`` (and ``encode_plus``/``batch_encode_plus``
where the installed version has them), once the script has imported them. A call made
while a batch is open becomes a call of kind ``tokenizer`` with the texts as inputs, and
``sections["tokens"]`` gets one record per call::

    {"call": id, "item": position of the dataset item being fetched | None,
     "texts": [str], "ids": [[int]], "tokens": [[str]]}

for the first samples only. The first tokenizer seen also gives ``data["vocab"]`` (token
strings by id) and ``data["tokenizer"]`` (its class and padding id), even when the script
tokenizes everything before training starts.
"""

from __future__ import annotations

import functools
import sys

from tvis.record.builder import TEXT_CHARS
from tvis.record.data import tokenizer_info, vocab_of
from tvis.record.extension import Extension
from tvis.record.wrapped import call_through, recording

# Tokens kept per text: a long document's first few thousand tokens are what a person reads.
MAX_TOKENS = 4096

_TARGETS = {
    "tokenizers": ("Tokenizer", ("encode", "encode_batch")),
    "transformers.tokenization_utils_base": (
        "PreTrainedTokenizerBase",
        ("__call__", "encode", "encode_plus", "batch_encode_plus"),
    ),
}


class Tokenizers(Extension):
    """Records tokenizer calls and the vocabulary of the first tokenizer used."""

    def install(self, recorder) -> None:
        self.wrapped: set[str] = set()
        self.depth = 0  # a transformers call runs the tokenizers one inside it
        self.refresh(recorder)

    def refresh(self, recorder) -> None:
        """Wrap the tokenizer libraries the script has imported so far."""
        for module_name, (cls_name, methods) in _TARGETS.items():
            cls = getattr(sys.modules.get(module_name), cls_name, None)
            if cls is None or module_name in self.wrapped:
                continue
            self.wrapped.add(module_name)
            for method in methods:
                original = cls.__dict__.get(method)
                if original is not None:
                    recorder.patches.set(cls, method, self._wrap(recorder, method, original))

    def _wrap(self, rec, method: str, original):
        @functools.wraps(original)
        def tokenize(tokenizer, *args, **kwargs):
            if self.depth:
                return original(tokenizer, *args, **kwargs)
            try:
                _note_vocab(rec, tokenizer)
            except Exception as e:
                rec.guard("reading a tokenizer's vocabulary", e)
            if recording(rec) is None:  # tokenizing a corpus before training: vocab only
                return original(tokenizer, *args, **kwargs)
            try:
                value = args[0] if args else _text_kwarg(kwargs)
                texts = _texts(value, rec.settings.samples)
            except Exception as e:
                rec.guard("reading a tokenizer call", e)
                texts = []
            self.depth += 1
            try:
                return call_through(
                    rec,
                    "tokenizer",
                    f"{type(tokenizer).__name__}.{method}",
                    original,
                    (tokenizer, *args),
                    kwargs,
                    [(f"text[{i}]", t) for i, t in enumerate(texts)],
                    after=functools.partial(_keep_tokens, tokenizer, texts),
                    cls=type(tokenizer).__name__,
                )
            finally:
                self.depth -= 1

        return tokenize


def _text_kwarg(kwargs: dict):
    for key in ("text", "sequence", "input", "batch_text_or_text_pairs"):
        if key in kwargs:
            return kwargs[key]
    return None


def _texts(value, limit: int) -> list[str]:
    """The first ``limit`` texts of a tokenizer input: one string, a batch of them, pairs
    or words."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)):
        return []
    texts = []
    for item in value[:limit]:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, (list, tuple)) and all(isinstance(t, str) for t in item):
            texts.append(" ".join(item))  # a (text, pair) or pre-split words
    return texts


def _note_vocab(rec, tokenizer) -> None:
    info = rec.data_info
    if "tokenizer" in info:
        return
    info["tokenizer"] = tokenizer_info(tokenizer)
    if "vocab" not in info:
        vocab = vocab_of(tokenizer)
        if vocab:
            info["vocab"] = vocab


def _keep_tokens(tokenizer, texts: list[str], batch, call, result) -> None:
    if batch.light or not batch.keeps_item():
        return
    rows = _encoded(tokenizer, result, batch.samples)
    if not rows:
        return
    batch.sections.setdefault("tokens", []).append(
        {
            "call": call.id,
            "item": batch.item,
            "texts": [t[:TEXT_CHARS] for t in texts[: len(rows)]],
            "ids": [ids[:MAX_TOKENS] for ids, _ in rows],
            "tokens": [tokens[:MAX_TOKENS] for _, tokens in rows],
        }
    )


def _encoded(tokenizer, result, limit: int) -> list[tuple[list[int], list[str]]]:
    """(ids, token strings) of the first ``limit`` texts, from what the tokenizer returned."""
    if hasattr(result, "ids") and hasattr(result, "tokens"):  # a tokenizers.Encoding
        return [(list(result.ids), list(result.tokens))][:limit]
    if isinstance(result, list) and result and hasattr(result[0], "ids"):
        return [(list(e.ids), list(e.tokens)) for e in result[:limit]]
    ids = result.get("input_ids") if hasattr(result, "get") else result
    if hasattr(ids, "tolist"):
        ids = ids[:limit].tolist() if getattr(ids, "ndim", 1) > 1 else ids.tolist()
    if not isinstance(ids, list) or not ids:
        return []
    rows = [ids] if isinstance(ids[0], int) else ids
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    out = []
    for row in rows[:limit]:
        if not isinstance(row, list) or not all(isinstance(i, int) for i in row):
            return []
        out.append((row, [str(t) for t in convert(row[:MAX_TOKENS])] if convert else []))
    return out
