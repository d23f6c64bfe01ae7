"""Token ids back into text, with the vocabulary a run recorded.

A recording knows a vocabulary when the script used a tokenizer library, or a dataset (or
its ``tokenizer``) with an ``itos``/``stoi`` table or ``get_vocab()``: ``data["vocab"]``
holds the token strings by id and ``data["tokenizer"]["specials"]`` the ids its own
``decode`` leaves out (padding, begin/end markers). Without one, ids stay ids and
``Vocabulary.why`` says so in one sentence.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tvis.agent.insight_views import join_tokens
from tvis.store.schema import Decoded

NO_VOCABULARY = (
    "the run recorded no vocabulary (no tokenizer call, itos/stoi table or get_vocab() "
    "was seen), so token ids are shown as numbers."
)


class Vocabulary:
    """Token strings by id and the special ids a decoder drops, from a run's ``data`` info."""

    def __init__(self, data: dict[str, Any] | None) -> None:
        data = data if isinstance(data, dict) else {}
        vocab = data.get("vocab")
        self.tokens: list[str] = vocab if isinstance(vocab, list) else []
        given = data.get("tokenizer")
        tokenizer = given if isinstance(given, dict) else {}
        specials = tokenizer.get("specials")
        self.specials = {i for i in specials if isinstance(i, int)} if specials else set()
        pad = tokenizer.get("pad_id")
        if isinstance(pad, int):
            self.specials.add(pad)
        # Where the recorder found the vocabulary, or why it found none that fits.
        self.source = (
            data.get("vocab_source") if isinstance(data.get("vocab_source"), str) else None
        )
        self.missing = data.get("vocab_why") if isinstance(data.get("vocab_why"), str) else None

    @property
    def known(self) -> bool:
        return bool(self.tokens)

    @property
    def why(self) -> str | None:
        """One sentence when ids cannot be decoded; None when they can."""
        return None if self.known else self.missing or NO_VOCABULARY

    @property
    def note(self) -> str | None:
        """The sentence shown where decoded text goes: which vocabulary was used, or why
        none was."""
        return self.source if self.known else self.why

    def token(self, i: Any) -> str:
        """The token string of id ``i`` (``<i>`` when the vocabulary has no such id)."""
        if isinstance(i, int) and 0 <= i < len(self.tokens):
            return self.tokens[i]
        return f"<{i}>"

    def text(self, ids: Iterable[int]) -> str | None:
        """The ids as text, special tokens left out, joined by the vocabulary's convention
        (characters, words, byte-level BPE, SentencePiece, WordPiece); None without one."""
        if not self.known:
            return None
        return join_tokens([self.token(int(i)) for i in ids if int(i) not in self.specials])

    def decoded(self, ids: list[int]) -> Decoded:
        """``{tokens, text}`` for an id list, or ``{why}`` without a vocabulary."""
        if not self.known:
            return {"why": self.why or NO_VOCABULARY}
        return {"tokens": [self.token(i) for i in ids], "text": self.text(ids)}


def class_names(data: dict[str, Any] | None, loss: dict[str, Any] | None) -> list[str] | None:
    """Names of a classifier's classes: the dataset's ``classes``, else the vocabulary when
    the model predicts one token of it per sample (a word-level model's next word)."""
    data = data if isinstance(data, dict) else {}
    if isinstance(data.get("classes"), list):
        return data["classes"]
    vocab = data.get("vocab")
    count = (loss or {}).get("classes")
    if isinstance(vocab, list) and isinstance(count, int) and count == len(vocab):
        return vocab
    return None


def vocabulary_for(data: dict[str, Any] | None, tree: Any, tensor_id: Any) -> Vocabulary:
    """The vocabulary that decodes the token ids in tensor ``tensor_id``: the source one
    when they feed a translation model's source embedding, else the run's vocabulary."""
    return source_vocabulary(data, tree, tensor_id) or Vocabulary(data)


def source_vocabulary(data: dict[str, Any] | None, tree: Any, tensor_id: Any) -> Vocabulary | None:
    """A translation model's source vocabulary when the ids in tensor ``tensor_id`` go
    into its source embedding (an encoder's, whose rows are the source vocabulary's);
    None for ids of the run's own vocabulary."""
    data = data if isinstance(data, dict) else {}
    source = data.get("source_vocab")
    if not isinstance(source, list) or not isinstance(tensor_id, int):
        return None
    rows = {
        t.get("module"): t.get("rows")
        for t in (data.get("insights") or {}).get("embeddings") or []
        if isinstance(t, dict)
    }
    for cid in tree.order:
        if tree.scalar(cid, "cls") != "Embedding" or rows.get(tree.scalar(cid, "name")) != len(
            source
        ):
            continue
        inputs = tree.by_id[cid].get("inputs") or []
        if inputs and isinstance(inputs[0], dict) and inputs[0].get("tensor") == tensor_id:
            return Vocabulary({"vocab": source, "vocab_source": data.get("source_vocab_source")})
    return None
