"""The loss call: per-sample and per-token loss, p(target), predictions and top-k."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import record_here
from insight_models import PAD, TinyLM, conv_setup, token_batch

from tvis.store.reader import RunReader


def _batch(outcome, index: int = 0):
    return RunReader(outcome.run_dir).batch(index)


def _array(batch, tensor_id) -> np.ndarray:
    return np.array(batch.array(tensor_id))


def _classifier_run(tmp_path, **settings):
    model, _, loader = conv_setup()
    x, y = next(iter(loader))
    reference = model(x).detach()

    def step():
        F.cross_entropy(model(x), y).backward()

    outcome = record_here(step, tmp_path, steps=1, **settings)
    return outcome, reference, y


def test_per_sample_loss_equals_unreduced_loss_classification(tmp_path):
    outcome, logits, y = _classifier_run(tmp_path)
    loss = _batch(outcome).record["loss"]
    expected = F.cross_entropy(logits, y, reduction="none")
    assert loss["fn"] == "cross_entropy" and loss["reduction"] == "mean"
    torch.testing.assert_close(torch.tensor(loss["per_sample"]), expected)
    assert not loss["merged"]


def test_p_target_equals_direct_softmax(tmp_path):
    outcome, logits, y = _classifier_run(tmp_path)
    batch = _batch(outcome)
    loss = batch.record["loss"]
    probs = logits.softmax(-1)
    p_target = torch.from_numpy(_array(batch, loss["p_target"]))
    torch.testing.assert_close(p_target, probs.gather(1, y[:, None])[:, 0])
    assert _array(batch, loss["target"]).tolist() == y.tolist()
    assert _array(batch, loss["pred"]).tolist() == probs.argmax(-1).tolist()
    top_p, top_i = probs.topk(4, dim=-1)
    assert _array(batch, loss["top_i"]).tolist() == top_i.tolist()
    torch.testing.assert_close(torch.from_numpy(_array(batch, loss["top_p"])), top_p)


def _lm_run(tmp_path, transposed: bool, **settings):
    torch.manual_seed(0)
    model = TinyLM()
    ids, targets = token_batch()
    with torch.no_grad():
        reference = model(ids)

    def step():
        logits = model(ids)
        if transposed:  # [B, T, V] -> [B, V, T], as cross_entropy takes sequences
            loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD)
        else:
            b, t, v = logits.shape
            loss = F.cross_entropy(logits.view(b * t, v), targets.view(-1), ignore_index=PAD)
        loss.backward()

    outcome = record_here(step, tmp_path, steps=1, **settings)
    return outcome, reference, targets


def _check_lm(outcome, logits, targets) -> None:
    batch = _batch(outcome)
    loss = batch.record["loss"]
    b, t, v = logits.shape
    per_token = F.cross_entropy(
        logits.reshape(b * t, v), targets.reshape(-1), ignore_index=PAD, reduction="none"
    )
    valid = targets.reshape(-1) != PAD
    recorded = torch.from_numpy(_array(batch, loss["per_element"])).reshape(-1)
    torch.testing.assert_close(recorded, per_token)
    assert _array(batch, loss["valid"]).reshape(-1).tolist() == valid.tolist()
    rows, mask = per_token.view(b, t), valid.view(b, t).float()
    expected = (rows * mask).sum(1) / mask.sum(1)
    torch.testing.assert_close(torch.tensor(loss["per_sample"]), expected)
    assert loss["ignore_index"] == PAD
    p = torch.from_numpy(_array(batch, loss["p_target"])).reshape(-1)
    direct = logits.reshape(b * t, v).softmax(-1).gather(1, targets.reshape(-1, 1))[:, 0]
    torch.testing.assert_close(p[valid], direct[valid])
    assert torch.isnan(p[~valid]).all()  # padding has no target
    pred = _array(batch, loss["pred"]).reshape(-1)
    assert pred.tolist() == logits.reshape(b * t, v).argmax(-1).tolist()


def test_per_token_loss_with_padding_merged_logits(tmp_path):
    outcome, logits, targets = _lm_run(tmp_path, transposed=False)
    _check_lm(outcome, logits, targets)
    loss = _batch(outcome).record["loss"]
    assert loss["merged"] and loss["tokens_per_sample"] == targets.shape[1]


def test_per_token_loss_with_padding_transposed_logits(tmp_path):
    outcome, logits, targets = _lm_run(tmp_path, transposed=True)
    _check_lm(outcome, logits, targets)
    assert _batch(outcome).record["loss"]["shape"] == list(targets.shape)


def test_decoding_kept_when_logits_exceed_max_elems(tmp_path):
    outcome, logits, targets = _lm_run(tmp_path, transposed=False, max_elems=64)
    batch = _batch(outcome)
    logits_entry = next(
        batch.tensor(a["tensor"])
        for c in batch.record["calls"]
        if c["name"] == "head"
        for a in c["outputs"]
    )
    assert logits_entry["stats"]["numel"] > 64
    assert logits_entry["value"] is None or logits_entry["value"]["kept"] != "all"
    loss = batch.record["loss"]
    n = targets.numel()
    assert _array(batch, loss["p_target"]).shape == (n,)
    assert _array(batch, loss["pred"]).shape == (n,)
    assert _array(batch, loss["top_i"]).shape == (n, 5)
    _check_lm(outcome, logits, targets)


def test_loss_value_and_gradients_unchanged(tmp_path):
    model, _, loader = conv_setup()
    x, y = next(iter(loader))
    plain = F.cross_entropy(model(x), y)
    plain.backward()
    plain_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    seen = []

    def step():
        loss = F.cross_entropy(model(x), y)
        seen.append(loss)
        loss.backward()

    record_here(step, tmp_path, steps=1)
    assert torch.equal(seen[0].detach(), plain.detach())
    for p, g in zip(model.parameters(), plain_grads, strict=True):
        assert torch.equal(p.grad, g)


def test_failing_loss_call_leaves_no_call_open(tmp_path):
    model, _, loader = conv_setup()
    x, y = next(iter(loader))
    corrupt = y.clone()
    corrupt[0] = 99  # no such class: cross_entropy raises

    def step():
        try:
            F.cross_entropy(model(x), corrupt)
        except (IndexError, RuntimeError):
            pass
        F.cross_entropy(model(x), y).backward()

    calls = _batch(record_here(step, tmp_path, steps=1)).record["calls"]
    roots = [c["name"] for c in calls if c["parent"] == -1]
    assert roots == ["ConvNet", "F.cross_entropy", "ConvNet", "F.cross_entropy"]


def _binary_run(tmp_path, loss_module, target_of, probabilities: bool):
    """A real/fake head (a GAN's discriminator, a yes/no classifier): one score a sample;
    or a tagger's row of labels, as wide as the target's rows."""
    model, _, loader = conv_setup()
    x, y = next(iter(loader))
    target = target_of(y)
    width = target.shape[1]
    scores = model(x)[:, :width].detach()

    def step():
        out = model(x)[:, :width]
        loss_module(out.sigmoid() if probabilities else out, target).backward()

    outcome = record_here(step, tmp_path, steps=1)
    return _batch(outcome), scores.sigmoid(), target


def test_binary_losses_give_each_sample_its_p_target_and_prediction(tmp_path):
    for i, (loss_module, probabilities) in enumerate(
        ((torch.nn.BCEWithLogitsLoss(), False), (torch.nn.BCELoss(), True))
    ):
        batch, p, target = _binary_run(
            tmp_path / str(i), loss_module, lambda y: (y % 2).float()[:, None], probabilities
        )
        loss = batch.record["loss"]
        is_one = target[:, 0] == 1
        expected = torch.where(is_one, p[:, 0], 1 - p[:, 0])
        torch.testing.assert_close(torch.from_numpy(_array(batch, loss["p_target"])), expected)
        assert _array(batch, loss["target"]).tolist() == is_one.int().tolist()
        assert _array(batch, loss["pred"]).tolist() == (p[:, 0] > 0.5).int().tolist()
        # −log p(target) is the sample's loss: what the Loss page's columns show side by side
        torch.testing.assert_close(torch.tensor(loss["per_sample"]), -expected.log())


def test_binary_loss_with_soft_targets_has_no_p_target(tmp_path):
    batch, _, _ = _binary_run(
        tmp_path, torch.nn.BCEWithLogitsLoss(), lambda y: torch.full((len(y), 1), 0.9), False
    )
    loss = batch.record["loss"]
    assert "p_target" not in loss and "pred" not in loss
    assert len(loss["per_sample"]) == 8


def test_a_multi_label_loss_gives_each_sample_the_mean_log_p_of_its_labels(tmp_path):
    from tvis.agent.insights.loss_arrays import LossArrays

    batch, p, target = _binary_run(
        tmp_path, torch.nn.BCELoss(), lambda y: torch.stack([y % 2, y // 2], 1).float(), True
    )
    loss = batch.record["loss"]
    assert loss["multilabel"] and loss["shape"] == [8, 2] and "pred" not in loss
    p_target = torch.from_numpy(_array(batch, loss["p_target"])).reshape(8, 2)
    torch.testing.assert_close(p_target, torch.where(target == 1, p, 1 - p))
    # −log p(target) of each label is its binary cross-entropy: its mean is the sample's loss
    torch.testing.assert_close(-p_target.log().mean(1), torch.tensor(loss["per_sample"]))
    arrays = LossArrays(batch, loss, 8)
    assert not arrays.per_token and arrays.size == 8
    rows = arrays.worst(8)
    for row in rows:
        assert row["neg_log_p"] == pytest.approx(row["loss"], rel=1e-5)
