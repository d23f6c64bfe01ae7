"""Sequence-first models ([T, B] token columns, nn.LSTM / nn.MultiheadAttention with
batch_first=False, log-probs flattened time-major to [T*B, V]): the batch is B samples of
T steps, each sample's kept rows and loss are its own column; a batch-first model that
transposes before such a module keeps batch = dim 0."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from helpers import record_here

from tvis.store.reader import RunReader

T, B, V = 6, 3, 11


class WordLM(nn.Module):
    """pytorch/examples word_language_model's RNNModel, small."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(V, 8)
        self.rnn = nn.LSTM(8, 8, 1)
        self.decoder = nn.Linear(8, V)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.encoder(tokens), hidden)
        return F.log_softmax(self.decoder(output).view(-1, V), dim=1), hidden


def _word_lm():
    torch.manual_seed(0)
    model = WordLM()
    tokens = torch.randint(0, V, (T, B))
    target = torch.randint(0, V, (T * B,))
    hidden = (torch.zeros(1, B, 8), torch.zeros(1, B, 8))
    return model, tokens, target, hidden


def _root_output(batch) -> dict:
    calls = batch.record["calls"]
    root = next(c for c in calls if c["kind"] == "module" and c["depth"] == 0)
    return batch.tensor(root["outputs"][0]["tensor"])


def test_a_word_lm_records_b_samples_each_with_its_own_rows_and_loss(tmp_path):
    model, tokens, target, hidden = _word_lm()
    with torch.no_grad():
        log_probs, _ = model(tokens, hidden)
    per_token = F.nll_loss(log_probs, target, reduction="none")

    def step():
        out, _ = model(tokens, hidden)
        F.nll_loss(out, target).backward()

    outcome = record_here(step, tmp_path, steps=1, samples=2)
    batch = RunReader(outcome.run_dir).batch(0)
    assert batch.record["batch"]["batch_size"] == B
    # The model's [T*B, V] output: the 2 kept samples' rows, each sample's T rows together.
    entry = _root_output(batch)
    assert entry["batch_dim"] == 0 and entry["batch_span"] == T
    kept = np.array(batch.array(entry["id"]))
    expected = log_probs.view(T, B, V)[:, :2].transpose(0, 1).reshape(2 * T, V)
    np.testing.assert_allclose(kept, expected.numpy(), rtol=1e-6)
    # Per-sample loss: the mean over the sample's own column; their mean is the loss.
    loss = batch.record["loss"]
    column_means = per_token.view(T, B).mean(0)
    torch.testing.assert_close(torch.tensor(loss["per_sample"]), column_means)
    assert np.isclose(np.mean(loss["per_sample"]), loss["value"], rtol=1e-6)
    # The stored targets read sample by sample: sample 1's are its own column.
    targets = np.array(batch.array(loss["target"])).reshape(B, T)
    assert targets[1].tolist() == target.view(T, B)[:, 1].tolist()


def test_an_inline_reduction_of_a_word_lm_splits_by_column(tmp_path):
    model, tokens, target, hidden = _word_lm()
    with torch.no_grad():
        log_probs, _ = model(tokens, hidden)
    per_token = F.nll_loss(log_probs, target, reduction="none")

    def step():
        out, _ = model(tokens, hidden)
        nll = -out.gather(1, target[:, None])[:, 0]  # [T*B], time-major
        nll.sum().backward()

    outcome = record_here(step, tmp_path, steps=1)
    loss = RunReader(outcome.run_dir).batch(0).record["loss"]
    assert loss["fn"] == "sum"
    sums = per_token.view(T, B).sum(0)
    torch.testing.assert_close(torch.tensor(loss["per_sample"]), sums)
    assert np.isclose(sum(loss["per_sample"]), loss["value"], rtol=1e-5)


class SeqFirstTransformer(nn.Module):
    """word_language_model's TransformerModel: [T, B] ids into batch_first=False layers."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(V, 8)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.decoder = nn.Linear(8, V)

    def forward(self, tokens):
        return self.decoder(self.encoder(self.embed(tokens)))


def test_a_sequence_first_transformer_records_b_samples(tmp_path):
    torch.manual_seed(0)
    model = SeqFirstTransformer()
    tokens = torch.randint(0, V, (T, B))

    def step():
        F.cross_entropy(model(tokens).view(-1, V), tokens.view(-1)).backward()

    outcome = record_here(step, tmp_path, steps=1)
    batch = RunReader(outcome.run_dir).batch(0)
    assert batch.record["batch"]["batch_size"] == B
    assert len(batch.record["loss"]["per_sample"]) == B


class ImageToAttention(nn.Module):
    """DETR-style: an image [N, C, H, W] flattened to [H*W, N, D] for batch_first=False
    attention; the batch is still N, dim 0 of the input."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 1)
        self.attn = nn.MultiheadAttention(8, 2)
        self.head = nn.Linear(8, 4)

    def forward(self, image):
        x = self.conv(image).flatten(2).permute(2, 0, 1)  # [H*W, N, D]
        x, _ = self.attn(x, x, x)
        return self.head(x.mean(0))


def test_a_batch_first_model_with_sequence_first_attention_inside_keeps_batch_dim_0(tmp_path):
    torch.manual_seed(0)
    model = ImageToAttention()
    image, labels = torch.randn(5, 3, 2, 3), torch.tensor([0, 1, 2, 3, 0])

    def step():
        F.cross_entropy(model(image), labels).backward()

    outcome = record_here(step, tmp_path, steps=1)
    batch = RunReader(outcome.run_dir).batch(0)
    assert batch.record["batch"]["batch_size"] == 5
    assert len(batch.record["loss"]["per_sample"]) == 5
    assert _root_output(batch)["batch_dim"] == 0
