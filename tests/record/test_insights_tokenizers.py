"""Tokenizer calls recorded against the real ``tokenizers`` (and ``transformers``, when
installed) packages, with a vocabulary built here from a few sentences."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import record_here
from insight_models import TinyLM
from torch.utils.data import DataLoader, Dataset

from tvis.store.reader import RunReader

tokenizers = pytest.importorskip("tokenizers", reason="pip install tokenizers (the dev extra)")

SENTENCES = [
    "the cat sat on the mat",
    "a dog ran far",
    "the dog sat on a hat",
    "a cat ran on the mat",
    "the hat sat far",
    "a mat on a dog",
]


def _tokenizer():
    """A word-level tokenizer trained on SENTENCES (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(special_tokens=["<pad>", "[UNK]"]))
    return tok


class Sentences(Dataset):
    """Tokenizes one sentence per item."""

    def __init__(self, tokenize) -> None:
        self.tokenize = tokenize

    def __len__(self) -> int:
        return len(SENTENCES)

    def __getitem__(self, index: int):
        return torch.tensor(self.tokenize(SENTENCES[index]))


def _pad(items):
    out = torch.zeros(len(items), max(len(i) for i in items), dtype=torch.long)
    for row, ids in enumerate(items):
        out[row, : len(ids)] = ids
    return out


def _train(loader, vocab: int):
    torch.manual_seed(0)
    model = TinyLM(vocab=vocab)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train():
        for ids in loader:
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], ignore_index=0)
            opt.zero_grad()
            loss.backward()
            opt.step()

    return train


def test_tokenizer_encode_per_item_gives_text_tokens_and_vocab(tmp_path):
    tok = _tokenizer()
    loader = DataLoader(Sentences(lambda s: tok.encode(s).ids), batch_size=3, collate_fn=_pad)
    outcome = record_here(_train(loader, tok.get_vocab_size()), tmp_path, steps=1, samples=2)
    run = RunReader(outcome.run_dir)
    record = run.batch(0).record
    calls = [c for c in record["calls"] if c["kind"] == "tokenizer"]
    assert [c["name"] for c in calls] == ["Tokenizer.encode"] * 3
    assert all(c["phase"] == "data" for c in calls)
    assert [c["inputs"][0]["text"] for c in calls] == SENTENCES[:3]
    kept = record["tokens"]
    assert [k["item"] for k in kept] == [0, 1]  # the first --samples items only
    for found, sentence in zip(kept, SENTENCES, strict=False):
        encoding = tok.encode(sentence)
        assert found["texts"] == [sentence]
        assert found["ids"] == [encoding.ids] and found["tokens"] == [encoding.tokens]
    data = run.index()["data"]
    by_id = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    assert data["vocab"] == [token for token, _ in by_id]
    assert data["tokenizer"]["cls"] == "Tokenizer"


def test_tokenizer_encode_batch_in_collate_keeps_each_samples_row(tmp_path):
    tok = _tokenizer()

    def collate(texts):
        return _pad([torch.tensor(e.ids) for e in tok.encode_batch(texts)])

    class Texts(Dataset):
        def __len__(self):
            return len(SENTENCES)

        def __getitem__(self, index):
            return SENTENCES[index]

    loader = DataLoader(Texts(), batch_size=4, collate_fn=collate)
    outcome = record_here(_train(loader, tok.get_vocab_size()), tmp_path, steps=1, samples=3)
    (found,) = RunReader(outcome.run_dir).batch(0).record["tokens"]
    assert found["item"] is None and found["texts"] == SENTENCES[:3]
    assert found["tokens"] == [tok.encode(s).tokens for s in SENTENCES[:3]]


def test_transformers_tokenizer_call_recorded_once(tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=_tokenizer(), pad_token="<pad>")
    loader = DataLoader(Sentences(lambda s: hf(s)["input_ids"]), batch_size=2, collate_fn=_pad)
    outcome = record_here(_train(loader, len(hf)), tmp_path, steps=1)
    run = RunReader(outcome.run_dir)
    record = run.batch(0).record
    calls = [c for c in record["calls"] if c["kind"] == "tokenizer"]
    cls = type(hf).__name__  # PreTrainedTokenizerFast (TokenizersBackend in transformers 5)
    assert [c["name"] for c in calls] == [f"{cls}.__call__"] * 2
    first = record["tokens"][0]
    assert first["tokens"] == [hf.convert_ids_to_tokens(hf(SENTENCES[0])["input_ids"])]
    data = run.index()["data"]
    assert data["tokenizer"] == {"cls": cls, "pad_id": hf.pad_token_id}
    assert data["vocab"][hf.pad_token_id] == "<pad>"


def test_tokenizer_patches_removed_after_recording(tmp_path):
    from tokenizers import Tokenizer

    before = {name: Tokenizer.__dict__[name] for name in ("encode", "encode_batch")}
    tok = _tokenizer()
    loader = DataLoader(Sentences(lambda s: tok.encode(s).ids), batch_size=3, collate_fn=_pad)
    record_here(_train(loader, tok.get_vocab_size()), tmp_path, steps=1)
    assert {name: Tokenizer.__dict__[name] for name in before} == before
