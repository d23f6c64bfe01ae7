"""Attention weights: taken from query·key softmaxes, never from other softmaxes."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from helpers import record_here
from insight_models import PAD, SegHead, TinyLM, VocabSoftmaxLM, token_batch

from tvis.store.reader import RunReader


def _record(tmp_path, model, step):
    outcome = record_here(step, tmp_path, steps=1)
    return RunReader(outcome.run_dir)


def _lm_step(model, ids, targets):
    def step():
        logits = model(ids)
        b, t, v = logits.shape
        F.cross_entropy(logits.reshape(b * t, v), targets.reshape(-1), ignore_index=PAD).backward()

    return step


def test_query_key_softmax_is_taken_as_attention(tmp_path):
    torch.manual_seed(0)
    model = TinyLM()
    reference = copy.deepcopy(model)
    ids, targets = token_batch()
    run = _record(tmp_path, model, _lm_step(model, ids, targets))
    batch = run.batch(0)
    found = batch.record["attention"]
    assert [a["module"] for a in found] == ["layers.0", "layers.1"]
    assert all(a["heads"] == 1 and a["shape"] == [4, 7, 7] for a in found)
    calls = {c["id"]: c["name"] for c in batch.record["calls"]}
    assert [calls[a["call"]] for a in found] == ["layers.0", "layers.1"]
    # The stored weights are the model's own: recompute them from each layer's input.
    inputs = []
    hooks = [
        m.register_forward_pre_hook(lambda m, a: inputs.append(a[0])) for m in reference.layers
    ]
    reference(ids)
    for h in hooks:
        h.remove()
    for layer, x, recorded in zip(reference.layers, inputs, found, strict=True):
        q, k, _ = layer.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / math.sqrt(x.shape[-1])
        mask = torch.ones(7, 7, dtype=torch.bool).tril()
        expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).detach()
        values = torch.from_numpy(np.array(batch.array(recorded["tensor"])))
        # stored rounded to 10 mantissa bits (tvis/store/rounding.py): within 2^-11
        torch.testing.assert_close(values, expected[: values.shape[0]], rtol=2**-11, atol=1e-5)
    assert run.index()["data"]["insights"]["attention"] == ["layers.0", "layers.1"]


def test_vocabulary_softmax_is_not_attention(tmp_path):
    torch.manual_seed(0)
    model = VocabSoftmaxLM()
    ids, targets = token_batch()

    def step():
        probs = model(ids)
        b, t, v = probs.shape
        F.nll_loss(probs.clamp_min(1e-9).log().reshape(b * t, v), targets.reshape(-1)).backward()

    run = _record(tmp_path, model, step)
    found = run.batch(0).record["attention"]
    assert [a["module"] for a in found] == ["layers.0", "layers.1"]  # not the [B, T, V] one


def test_segmentation_softmax_is_not_attention(tmp_path):
    torch.manual_seed(0)
    model = SegHead()
    x = torch.randn(2, 3, 6, 6)

    def step():
        model(x).backward()

    run = _record(tmp_path, model, step)
    assert "attention" not in run.batch(0).record
    assert "attention" not in run.index()["data"].get("insights", {})
