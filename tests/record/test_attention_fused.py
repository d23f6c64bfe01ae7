"""Attention the model never materialises: fused scaled_dot_product_attention recomputed
from q·k for the kept samples, nn.Softmax modules, and nn.MultiheadAttention."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from helpers import record_here

from tvis.agent.client import LocalClient
from tvis.record.attention import RECOMPUTED
from tvis.store.reader import RunReader


class FusedAttention(nn.Module):
    """Heads through F.scaled_dot_product_attention, with grouped k/v heads when
    ``kv_heads`` < ``heads`` (enable_gqa), and any mask, scale and dropout given."""

    def __init__(self, dim=16, heads=4, kv_heads=4, **sdpa) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.sdpa = heads, kv_heads, sdpa
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim * kv_heads // heads)
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, x, mask=None):
        b, t, c = x.shape
        d = c // self.heads
        q = self.q(x).view(b, t, self.heads, d).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2 * self.kv_heads, d).transpose(1, 2).chunk(2, dim=1)
        self.seen.append((q.detach().clone(), k.detach().clone()))
        gqa = {"enable_gqa": True} if self.kv_heads != self.heads else {}
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **gqa, **self.sdpa)
        return y.transpose(1, 2).reshape(b, t, c)


def _expected(q, k, mask=None, causal=False, scale=None):
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scores = q @ k.transpose(-2, -1) * (scale or 1 / math.sqrt(q.shape[-1]))
    if causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:]).bool().tril(), -math.inf)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores, dim=-1)


def _run(tmp_path, model, x, mask=None, **settings):
    model.seen.clear()
    before = copy.deepcopy(model)

    def step():
        model(x, mask).pow(2).mean().backward()

    outcome = record_here(step, tmp_path, steps=1, **settings)
    # Observing never changes training: the gradients are those of a plain run.
    before(x, mask).pow(2).mean().backward()
    for a, b in zip(before.parameters(), model.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad)
    return RunReader(outcome.run_dir)


def _weights(run):
    batch = run.batch(0)
    found = batch.record["attention"]
    return found, [np.array(batch.array(a["tensor"])) for a in found]


def test_fused_causal_attention_is_recomputed_for_kept_samples(tmp_path):
    torch.manual_seed(0)
    model = FusedAttention(is_causal=True)
    x = torch.randn(5, 6, 16)
    run = _run(tmp_path, model, x, samples=2)
    found, values = _weights(run)
    assert found[0]["recomputed"] == RECOMPUTED
    assert found[0]["shape"] == [5, 4, 6, 6] and found[0]["heads"] == 4
    q, k = model.seen[0]
    assert values[0].shape == (2, 4, 6, 6)  # the kept samples only
    torch.testing.assert_close(torch.from_numpy(values[0]), _expected(q, k, causal=True)[:2])
    assert run.index()["data"]["insights"]["attention"] == [found[0]["module"]]


def test_grouped_heads_mask_and_scale_follow_the_kernel(tmp_path):
    torch.manual_seed(1)
    model = FusedAttention(heads=4, kv_heads=2, scale=0.3)
    x = torch.randn(3, 5, 16)
    mask = torch.rand(3, 1, 5, 5) > 0.3
    mask[..., 0] = True  # every query sees at least one key
    run = _run(tmp_path, model, x, mask)
    found, values = _weights(run)
    q, k = model.seen[0]
    expected = _expected(q, k, mask=mask, scale=0.3)
    torch.testing.assert_close(torch.from_numpy(values[0]), expected)
    # And the kernel itself agrees: its output is those weights times v.
    assert found[0]["heads"] == 4


def test_float_mask_is_added_to_the_scores(tmp_path):
    torch.manual_seed(2)
    model = FusedAttention()
    x = torch.randn(2, 4, 16)
    bias = torch.randn(4, 4)
    run = _run(tmp_path, model, x, bias)
    _, values = _weights(run)
    q, k = model.seen[0]
    torch.testing.assert_close(torch.from_numpy(values[0]), _expected(q, k, mask=bias))


def test_no_attention_flag_leaves_fused_attention_out(tmp_path):
    torch.manual_seed(0)
    run = _run(tmp_path, FusedAttention(is_causal=True), torch.randn(2, 4, 16), attention=False)
    assert "attention" not in run.batch(0).record


def test_no_kept_samples_says_attention_ran_unkept(tmp_path):
    torch.manual_seed(0)
    run = _run(tmp_path, FusedAttention(is_causal=True), torch.randn(2, 4, 16), samples=0)
    assert "attention" not in run.batch(0).record
    assert run.index()["data"]["insights"]["attention_unkept"]


def test_weights_bigger_than_max_elems_are_not_recomputed_and_say_so(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(2, 8, 16)  # one sample's maps: 4 heads × 8 × 8 = 256 values
    run = _run(tmp_path, FusedAttention(is_causal=True), x, max_elems=255)
    assert "attention" not in run.batch(0).record
    assert run.index()["data"]["insights"]["attention_too_large"]
    with LocalClient(run.path) as client:
        assert "exceed --max-elems" in client.call("insights", run=".")["attention_absent"]


class Blocks(nn.Module):
    """nn.MultiheadAttention both ways, a TransformerEncoder, and an nn.Softmax module."""

    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.need_weights = need_weights
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.qk = nn.Linear(16, 32)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        y, _ = self.mha(x, x, x, need_weights=self.need_weights, average_attn_weights=False)
        y = self.encoder(y)
        q, k = self.qk(y).chunk(2, dim=-1)
        return self.softmax(q @ k.transpose(1, 2) / 4) @ y


def _record_blocks(tmp_path, need_weights):
    torch.manual_seed(0)
    model = Blocks(need_weights)
    x = torch.randn(3, 5, 16)
    outcome = record_here(lambda: model(x).sum().backward(), tmp_path, steps=1)
    found = RunReader(outcome.run_dir).batch(0).record["attention"]
    return {a["module"]: a for a in found}


def test_multihead_attention_without_weights_is_recomputed(tmp_path):
    found = _record_blocks(tmp_path, need_weights=False)
    assert found["mha"]["recomputed"] == RECOMPUTED and found["mha"]["heads"] == 4
    assert found["encoder.layers.0.self_attn"]["recomputed"] == RECOMPUTED
    assert "recomputed" not in found["Blocks"]  # nn.Softmax(dim=-1) on q·k: the model's own


def test_multihead_attention_weights_it_returns_are_kept(tmp_path):
    found = _record_blocks(tmp_path, need_weights=True)
    assert found["mha"]["shape"] == [3, 4, 5, 5] and "recomputed" not in found["mha"]


def test_per_pixel_softmax_module_is_not_attention(tmp_path):
    torch.manual_seed(0)
    head = nn.Sequential(nn.Conv2d(3, 4, 1), nn.Softmax(dim=1))
    x = torch.randn(2, 3, 6, 6)
    outcome = record_here(lambda: head(x).pow(2).sum().backward(), tmp_path, steps=1)
    assert "attention" not in RunReader(outcome.run_dir).batch(0).record
