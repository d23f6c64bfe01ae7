"""Scripts whose loss is not one call of a loss function (tests/wild/scripts/<name>/train.py,
written as their public originals are): a VAE's reconstruction + β·KL summed in a
function, DDPM's MSE on the predicted noise, CLIP's contrastive loss returned in a dict,
knowledge distillation's soft KL + hard CE, timm's mixup soft targets, HF-style gradient
accumulation under bf16 autocast, a GRU tagger's hand-masked token mean, a
multi-task model's dict of weighted losses summed in a Lightning-style training_step, a
subword tagger with both ignore_index=-100 and an attention mask multiplied in, a
sequence-first LSTM LM with a (T, B) mask, and label-distribution learning whose whole
loss is F.kl_div(reduction="batchmean").

Each is recorded with `tvis run` as a user runs it, and its Loss page is checked against
what a reader of the script knows: which loss backward ran on, how it is made of terms
and weights, and each sample's loss where the loss splits by sample (and every sample
listed, its loss unknown, where it does not).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import FirstBatch, printed_under_tvis, record_script, record_scripts

from tvis.agent.client import LocalClient

SCRIPTS = Path(__file__).resolve().parent / "scripts"
NAMES = (
    "vae_beta_kl",
    "ddpm_noise",
    "clip_contrastive",
    "distill_kd",
    "mixup_soft_targets",
    "accum_autocast_warmup",
    "gru_packed_masked",
    "multitask_dict_losses",
    "subword_tagger_ignore_and_mask",
    "rnn_lm_time_major_mask",
    "label_distribution_kl",
)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path | str]:
    root = tmp_path_factory.mktemp("wild_losses")
    return record_scripts(SCRIPTS, NAMES, root)


def _open(recordings, name: str) -> FirstBatch:
    runs = recordings[name]
    assert isinstance(runs, Path), f"{name} failed under tvis:\n{runs}"
    with LocalClient(runs) as client:
        return FirstBatch(client)


def test_every_script_prints_under_tvis_what_it_prints_plainly(recordings):
    for name, runs in recordings.items():
        assert isinstance(runs, Path), f"{name} failed:\n{runs}"
        plain, lines = printed_under_tvis(runs)
        assert lines and lines == plain[: len(lines)], name  # same losses, same order


def test_recording_adds_no_warning_of_its_own_to_what_a_script_prints(recordings):
    """What tvis does to read the loss (re-applying F.kl_div per sample under vmap, which
    torch warns has no batching rule) prints nothing the script does not print plainly."""
    for name, runs in recordings.items():
        assert isinstance(runs, Path), f"{name} failed:\n{runs}"
        plain = set((runs.parent / "plain_stderr.txt").read_text().splitlines())
        added = [
            line
            for line in (runs.parent / "tvis_stderr.txt").read_text().splitlines()
            if line.strip() and not line.startswith("tvis") and line not in plain
        ]
        assert not added, (name, added)


@pytest.mark.parametrize("name", NAMES)
def test_replay_has_a_loss_step_for_the_first_training_batch(recordings, name):
    runs = recordings[name]
    assert isinstance(runs, Path), runs
    with LocalClient(runs) as client:
        rec = FirstBatch(client)
        events = rec.call("replay", sample=0, limit=5000)["events"]
    losses = [e for e in events if e["kind"] == "loss" and e["batch"] == rec.index]
    assert losses and losses[0]["value"] == pytest.approx(rec.detail["value"])


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_a_vae_loss_summed_in_a_function_shows_each_samples_share_of_the_sum(recordings):
    rec = _open(recordings, "vae_beta_kl")
    d = rec.detail
    assert d["fn"] == "loss_function" and d["call"]["kind"] == "loss"
    assert d["value"] == pytest.approx(d["backward_loss"], rel=1e-6) and not d.get("terms")
    assert d["reduction"] == "sum"  # BCE and KL summed over the batch, not averaged
    losses = [r["loss"] for r in rec.rows]
    assert len(losses) == rec.size == 16
    assert sum(losses) == pytest.approx(d["backward_loss"], rel=1e-4)
    # No per-element losses: the page's histogram is of the per-sample ones, said so.
    assert d["hist_of"] == "sample" and sum(d["hist"]["counts"]) == 16


def test_ddpm_noise_mse_shows_per_sample_losses_over_each_samples_pixels(recordings):
    rec = _open(recordings, "ddpm_noise")
    d = rec.detail
    assert d["fn"] == "mse_loss" and d["reduction_check"]["matches"]
    assert d["per_element_shape"] == [8, 1, 12, 12] and d["hist_of"] == "element"
    losses = [r["loss"] for r in rec.rows]
    assert len(losses) == 8 and _mean(losses) == pytest.approx(d["backward_loss"], rel=1e-5)
    assert all("target" not in r for r in rec.rows)  # noise, not classes


def test_a_contrastive_loss_returned_in_a_dict_is_the_loss_and_lists_every_sample(recordings):
    rec = _open(recordings, "clip_contrastive")
    d = rec.detail
    # ClipLoss(output_dict=True) returns {"contrastive_loss": ...}; sum(losses.values()).
    assert d["fn"] == "ClipLoss" and d["call"]["cls"] == "ClipLoss"
    assert d["value"] == pytest.approx(d["backward_loss"], rel=1e-6)
    assert "does not split by sample" in d["per_sample_why"]  # each image's row needs the batch
    # ClipLoss of one image-text pair alone is 0 (its only candidate is itself): said so
    assert "the loss of one sample alone is 0 whatever the sample" in d["per_sample_why"]
    worst = d["worst"]
    assert sorted(r["sample"] for r in worst) == list(range(12))
    assert all(r["loss"] is None and r["neg_log_p"] > 0 for r in worst)
    nll = [r["neg_log_p"] for r in worst]
    assert nll == sorted(nll, reverse=True)
    # Its targets are batch positions, not token ids: no vocabulary is looked for them.
    assert "vocab_why" not in rec.info["data"] and "vocab" not in rec.info["data"]
    # labels = arange(B) over B×B similarities: the "classes" are batch positions, so no
    # confusion matrix and no class-based Grad-CAM, and the page says what the loss is.
    from tvis.tui.pages.loss import CONTRASTIVE

    assert d["contrastive"] and d.get("confusion") is None and CONTRASTIVE.startswith("a contr")
    assert not rec.call("insights")["gradcam"]


def test_distillation_shows_the_hard_term_its_weight_and_what_the_kl_adds(recordings):
    rec = _open(recordings, "distill_kd")
    d = rec.detail
    assert rec.info["batches"][0]["light"]  # the teacher's no_grad forward comes first
    assert d["fn"] == "cross_entropy" and d["call"]["cls"] == "CrossEntropyLoss"
    # 0.25 · F.kl_div(reduction="batchmean") · T² (T = 2) + 0.75 · CE: both named terms.
    term, kl = d["terms"]  # the hard term describes the loss: it has classes
    assert kl["fn"] == "F.kl_div" and kl["weight"] == pytest.approx(0.25 * 2**2)
    assert term["fn"] == "CrossEntropyLoss" and term["weight"] == pytest.approx(0.75)
    assert term["value"] == pytest.approx(d["value"]) and kl["value"] >= 0  # a KL divergence
    assert abs(d["rest"]) < 1e-5  # nothing left that no loss call made
    losses = [r["loss"] for r in rec.rows]
    assert _mean(losses) == pytest.approx(d["value"], rel=1e-5)


def test_mixup_soft_targets_are_shown_as_two_classes_mixed_by_lambda(recordings):
    """mixup_target: λ·one_hot(y) + (1 − λ)·one_hot(y.flip(0)), smoothed by 0.1 over 10
    classes: each sample's target is its own class and its mirror's in the batch, with
    one λ for the batch, every other class 0.01; never one hard label."""
    from tvis.tui.pages.loss_soft import SOFT, mix_lambda, soft_targets_text

    rec = _open(recordings, "mixup_soft_targets")
    d = rec.detail
    assert d["fn"] == "SoftTargetCrossEntropy" and d["reduction"] == "mean"
    assert d["value"] == pytest.approx(d["backward_loss"], rel=1e-6)
    losses = [r["loss"] for r in rec.rows]
    assert len(losses) == 16 and _mean(losses) == pytest.approx(d["value"], rel=1e-5)
    assert d["soft_target"] == "mix" and "confusion" not in d
    assert all("target" not in r and "correct" not in r for r in rec.rows)
    mixes = [r["soft_target"] for r in rec.rows]
    assert all(m["rest"] == pytest.approx(0.1 / 10) for m in mixes)
    lambdas = {round(mix_lambda(m["mix"], m["rest"]), 5) for m in mixes if len(m["mix"]) == 2}
    assert len(lambdas) == 1 and 0 < lambdas.pop() < 1  # one λ drawn for the batch
    for i, m in enumerate(mixes):
        mirror = mixes[len(mixes) - 1 - i]["mix"]
        classes = [c["class"] for c in m["mix"]]
        assert classes == [c["class"] for c in mirror][:: 1 if len(classes) == 1 else -1]
    shown = soft_targets_text(rec.rows, 0).plain
    assert SOFT["mix"] in shown and "× class" in shown and "0.01 (label smoothing" in shown


def test_gradient_accumulation_shows_the_scale_and_the_steps_batches(recordings):
    rec = _open(recordings, "accum_autocast_warmup")
    d = rec.detail
    (term,) = d["terms"]  # loss / gradient_accumulation_steps
    assert term["weight"] == pytest.approx(1 / 3) and abs(d["rest"]) < 1e-6
    assert d["backward_loss"] == pytest.approx(d["value"] / 3, rel=1e-6)
    # `step % 3 == 0` steps after batch 0, then after batches 1-3.
    steps = {s["index"]: s["batches"] for s in rec.info["steps"]}
    assert steps[0] == [0] and steps[1] == [1, 2, 3]
    # Three labels of a token-sequence classifier are not "the model's 3 token ids".
    assert "vocab_why" not in rec.info["data"]
    assert _mean([r["loss"] for r in rec.rows]) == pytest.approx(d["value"], rel=1e-5)


def test_a_hand_masked_token_mean_lists_every_sample_with_its_loss_unknown(recordings):
    rec = _open(recordings, "gru_packed_masked")
    d = rec.detail
    assert d["fn"] == "masked_loss" and d["per_token"]
    assert "does not split by sample" in d["per_sample_why"]
    assert sorted(r["sample"] for r in d["worst"]) == list(range(8))
    assert all(r["loss"] is None and r["neg_log_p"] > 0 for r in d["worst"])
    # Six tags predicted from thirteen words: tags are not token ids of any vocabulary.
    assert "vocab_why" not in rec.info["data"]
    # loss * mask with mask = arange(T) < lengths, lengths 3–8 padded to the batch's longest:
    # only each sentence's own words are its tokens (the padding enters no accuracy).
    tokens = [r["tokens"] for r in rec.rows]
    assert all(3 <= t <= 8 for t in tokens) and min(tokens) < max(tokens)
    assert all(
        r["accuracy"] * r["tokens"] == pytest.approx(round(r["accuracy"] * r["tokens"]))
        for r in rec.rows
    )


def _script_globals(name: str, tmp_path: Path) -> dict:
    """What the script holds once run plainly (its data as the reader of it knows it)."""
    import os
    import runpy

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        return runpy.run_path(str(SCRIPTS / name / "train.py"), run_name="__main__")
    finally:
        os.chdir(here)


def test_ignore_index_and_a_hand_mask_both_leave_their_positions_out(recordings, tmp_path):
    """Subwords after a word's first are labelled -100 (cross_entropy's ignore_index) and
    the padding is multiplied out by the attention mask: each sentence's tokens are its
    words, neither its other subwords nor its padding."""
    rec = _open(recordings, "subword_tagger_ignore_and_mask")
    d = rec.detail
    assert d["per_token"] and d["terms"][0]["fn"] == "(loss * active).sum() / active.sum()"
    data = _script_globals("subword_tagger_ignore_and_mask", tmp_path)["data"]
    words = [sum(label != -100 for label in labels) for _, labels in data[: rec.size]]
    subwords = [len(ids) for ids, _ in data[: rec.size]]
    assert words != subwords  # the two masks differ: their union is what counts
    assert [r["tokens"] for r in rec.rows] == words
    # (loss * active).sum() split by sample: each sentence's share of the summed loss
    total = d["reduction_check"]["recorded"]
    assert sum(r["loss"] for r in rec.rows) == pytest.approx(total, rel=1e-5)


def test_a_time_major_hand_mask_leaves_each_sentences_padding_out(recordings, tmp_path):
    """pytorch/examples' layout, (T, B) with batch_first=False, and a (T, B) mask of real
    tokens multiplied into the per-token loss: each sample is its own sentence, its
    padding not among its tokens."""
    rec = _open(recordings, "rnn_lm_time_major_mask")
    corpus = _script_globals("rnn_lm_time_major_mask", tmp_path)["corpus"]
    assert [r["tokens"] for r in rec.rows] == [len(s) - 1 for s in corpus[: rec.size]]
    assert all(r["text"].endswith("<eos>") and "<pad>" not in r["text"] for r in rec.rows)


def test_a_kl_divergence_that_is_the_whole_loss_shows_each_samples_kl(recordings):
    """F.kl_div(log_softmax(logits), q, reduction="batchmean") alone: each sample's loss
    is its KL summed over the age bins, and batchmean is their sum ÷ B — computed here
    from the script's own model and data before its first step."""
    import torch

    rec = _open(recordings, "label_distribution_kl")
    d = rec.detail
    assert d["fn"] == "F.kl_div" and d["reduction"] == "batchmean" and not d.get("terms")
    source = (SCRIPTS / "label_distribution_kl" / "train.py").read_text()
    before_training: dict = {}
    exec(compile(source.split("for _epoch")[0], "train.py", "exec"), before_training)
    model, faces, ages = (before_training[k] for k in ("model", "faces", "ages"))
    q = before_training["label_distribution"](ages[: rec.size])
    with torch.no_grad():
        log_p = torch.log_softmax(model(faces[: rec.size]), dim=1)
    kl = (q * (q.log() - log_p)).sum(1)
    assert [r["loss"] for r in rec.rows] == pytest.approx(kl.tolist(), rel=1e-4)
    assert d["value"] == pytest.approx(float(kl.sum() / rec.size), rel=1e-5)
    check = d["reduction_check"]  # every bin's term, summed, ÷ the batch size
    assert check["terms"] == rec.size * 20 and check["divisor"] == rec.size and check["matches"]
    # q is a Gaussian over the age bins, not a mix of two labels: its heaviest bin is the age
    assert d["soft_target"] == "distribution" and "confusion" not in d
    heaviest = [r["soft_target"]["mix"][0]["class"] for r in rec.rows]
    assert heaviest == [int(a) for a in ages[: rec.size]]


def test_a_dict_of_weighted_losses_shows_each_term_and_its_weight(recordings):
    from tvis.tui.pages.loss import call_line

    rec = _open(recordings, "multitask_dict_losses")
    d = rec.detail
    # losses = {"cls": 1.0 * CE, "reg": 0.5 * GaussianNLL}; loss = sum(losses.values()),
    # returned in a dict by training_step: the first term is the one described.
    assert d["fn"] == "cross_entropy" and d["call"]["cls"] == "CrossEntropyLoss"
    cls, reg = d["terms"]
    assert (cls["fn"], reg["fn"]) == ("CrossEntropyLoss", "GaussianNLLLoss")
    assert (cls["weight"], reg["weight"]) == (pytest.approx(1.0), pytest.approx(0.5))
    assert cls["value"] == pytest.approx(d["value"]) and abs(d["rest"]) < 1e-5
    assert cls["value"] + 0.5 * reg["value"] == pytest.approx(d["backward_loss"], rel=1e-6)
    # The rows are the cross-entropy's: its per-sample losses, its targets and predictions.
    assert _mean([r["loss"] for r in rec.rows]) == pytest.approx(cls["value"], rel=1e-5)
    assert all(r["correct"] == (r["target"] == r["pred"]) for r in rec.rows)
    shown = call_line(d).plain
    assert "= 1 × CrossEntropyLoss" in shown and "+ 0.5 × GaussianNLLLoss" in shown


REGRESSION_TERM_FIRST = """
import torch
from torch import nn
import torch.nn.functional as F


class RMSE(nn.Module):
    def forward(self, pred, target):
        return ((pred - target) ** 2).mean().sqrt()


torch.manual_seed(0)
trunk, cls_head, reg_head = nn.Linear(6, 8), nn.Linear(8, 3), nn.Linear(8, 1)
params = [*trunk.parameters(), *cls_head.parameters(), *reg_head.parameters()]
opt = torch.optim.SGD(params, lr=0.1)
rmse = RMSE()
for step in range(2):
    x, y, v = torch.randn(10, 6), torch.randint(0, 3, (10,)), torch.randn(10, 1)
    h = trunk(x).relu()
    loss = rmse(reg_head(h), v) + F.cross_entropy(cls_head(h), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_loss_term_of_its_own_does_not_borrow_the_classes_of_a_term_beside_it(tmp_path):
    """The regression term comes first, so it is the one described: the cross-entropy
    beside it predicts other things, and its targets must not be shown as the RMSE's."""
    run = record_script(tmp_path, REGRESSION_TERM_FIRST, "--steps", "1")
    with LocalClient(run / "..") as client:
        rec = FirstBatch(client)
    d = rec.detail
    assert d["fn"] == "RMSE" and [t["fn"] for t in d["terms"]] == ["RMSE", "F.cross_entropy"]
    assert all("target" not in r and "pred" not in r for r in rec.rows)
    assert "confusion" not in d


PROBABILITY_TARGETS = """
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Linear(6, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    x, y = torch.randn(8, 6), torch.randint(0, 4, (8,))
    lam = 0.7
    q = lam * F.one_hot(y, 4).float() + (1 - lam) * F.one_hot(y.flip(0), 4).float()
    loss = F.cross_entropy(model(x), q)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_cross_entropy_with_probability_targets_shows_each_samples_mix(tmp_path):
    """F.cross_entropy given class probabilities (0.7 of a label, 0.3 of its mirror's):
    each sample's two classes with λ = 0.7, no hard label and no confusion matrix."""
    from tvis.tui.pages.loss_soft import mix_lambda

    run = record_script(tmp_path, PROBABILITY_TARGETS, "--steps", "1")
    with LocalClient(run / "..") as client:
        rec = FirstBatch(client)
    d = rec.detail
    assert d["fn"] == "cross_entropy" and d["soft_target"] == "mix" and "confusion" not in d
    assert all("target" not in r for r in rec.rows)
    mixes = [r["soft_target"] for r in rec.rows]
    two = [m for m in mixes if len(m["mix"]) == 2]
    assert two and all(mix_lambda(m["mix"], m["rest"]) == pytest.approx(0.7) for m in two)
    assert all(m["mix"][0]["weight"] == pytest.approx(1.0) for m in mixes if len(m["mix"]) == 1)


# The model each script trains, by the name the script gives it.
TRAINED = {
    "multitask_dict_losses": "model",
    "distill_kd": "nn_light",
    "accum_autocast_warmup": "model",
    "clip_contrastive": "model",
    "vae_beta_kl": "model",
    "mixup_soft_targets": "model",
    "label_distribution_kl": "model",
    "subword_tagger_ignore_and_mask": "model",
    "rnn_lm_time_major_mask": "model",
}


@pytest.mark.parametrize("name", sorted(TRAINED))
def test_recording_a_whole_script_leaves_its_training_bit_identical(tmp_path, monkeypatch, name):
    """Run to its end plainly and recorded (the terms' weights are had from an extra
    autograd pass): every parameter after the last step is the same bits."""
    import runpy

    import torch

    from tvis.record.builder import Settings
    from tvis.record.runner import record

    script = SCRIPTS / name / "train.py"
    monkeypatch.chdir(tmp_path)

    def train() -> dict:
        torch.manual_seed(0)  # the scripts that seed nothing (the teacher) start alike
        return runpy.run_path(str(script), run_name="__main__")[TRAINED[name]].state_dict()

    plain = train()
    recorded: dict = {}
    outcome = record(
        lambda: recorded.update(train()), Settings(steps=1000), script.parent, tmp_path / "run"
    )
    assert outcome.status == "complete" and outcome.steps >= 2, outcome
    assert plain.keys() == recorded.keys()
    for key, value in plain.items():
        assert torch.equal(value, recorded[key]), (name, key)
