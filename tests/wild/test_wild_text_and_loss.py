"""Scripts written the way public training code is (scripts/<name>/train.py), recorded with
`tvis run` as a user runs them, and every page that applies to each checked through the
agent: decoded text for every language model (with the vocabulary it came from), the loss
and its per-sample values for every script, Grad-CAM for the CNN classifier, the first
training batch where training starts after an evaluation, and a segmentation script's
masks and per-pixel loss as pictures.

A page that should have content and says it has none fails here; so does a "nothing here"
sentence that is not true of the script.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from support import printed_under_tvis, record_script, record_scripts

from tvis.agent.client import LocalClient
from tvis.agent.protocol import AgentError

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@dataclass(frozen=True)
class Expect:
    """What a reader of the script knows it holds."""

    vocab: str | None = None  # where its vocabulary is, as the run must name it
    per_token: bool = False  # a language model predicting every position
    loss: str = "cross_entropy"  # the loss function or class backward ran on
    gradcam: bool = False  # a CNN classifier
    pixels: bool = False  # a class per pixel (segmentation)


EXPECT = {
    "char_bigram_itos_dict": Expect(vocab="itos dict in train.py globals", per_token=True),
    "nanogpt_meta_pkl_eval_first": Expect(
        vocab="meta.pkl beside the data in data/shakespeare_char", per_token=True
    ),
    "mingpt_dataset_itos": Expect(vocab="CharDataset", per_token=True),
    "word_lm_number_dict": Expect(vocab="number_dict dict in train.py globals"),
    "lstm_idx2word_dict": Expect(
        vocab="corpus.dictionary.idx2word dict in train.py globals", per_token=True, loss="nll_loss"
    ),
    "hf_tokenizer_trainer": Expect(
        vocab="self.processing_class (Tokenizer) in train.py Trainer.compute_loss()",
        per_token=True,
    ),
    "gpt_tiktoken_encoder": Expect(vocab="enc (Encoding) in train.py globals", per_token=True),
    "sentencepiece_lm": Expect(
        vocab="sp (SentencePieceProcessor) in train.py globals", per_token=True
    ),
    "cnn_label_smoothing_own_class": Expect(loss="LabelSmoothingCrossEntropy", gradcam=True),
    "regression_pow_mean": Expect(loss="mean"),
    "custom_loss_module": Expect(loss="FocalLoss"),
    "seg_unet": Expect(pixels=True),
}


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path | str]:
    """Each script recorded once (three at a time): its runs folder, or what went wrong."""
    root = tmp_path_factory.mktemp("wild")
    return record_scripts(SCRIPTS, EXPECT, root)


def test_every_wild_script_prints_under_tvis_what_it_prints_plainly(recordings):
    for name, runs in recordings.items():
        assert isinstance(runs, Path), f"{name} failed:\n{runs}"
        plain, lines = printed_under_tvis(runs)
        assert lines == plain[: len(lines)], name  # same losses, same order (if any yet)


class Run:
    """One recorded script seen through the agent, opened on its first training batch."""

    def __init__(self, client: LocalClient) -> None:
        self.client = client
        (row,) = client.call("runs")
        self.name = row["run"]
        self.info = client.call("run", run=self.name)
        self.data = self.info["data"]
        self.batch = next(b["index"] for b in self.info["batches"] if not b.get("light"))

    def call(self, method: str, **params):
        return self.client.call(method, run=self.name, **params)


@pytest.fixture(params=sorted(EXPECT))
def run(request, recordings):
    outcome = recordings[request.param]
    assert isinstance(outcome, Path), f"{request.param} failed under tvis:\n{outcome}"
    with LocalClient(outcome) as client:
        yield request.param, EXPECT[request.param], Run(client)


def test_every_language_model_shows_decoded_text_from_its_own_vocabulary(run):
    name, expect, rec = run
    if expect.vocab is None:
        assert "vocab" not in rec.data and "vocab_why" not in rec.data, rec.data.get("vocab_why")
        return
    source = rec.data.get("vocab_source") or rec.data.get("vocab_why")
    # Files are named from the repository root (the default project): compare by file name.
    source = source and source.replace(f"tests/wild/scripts/{name}/", "")
    assert source and expect.vocab in source and source.startswith("vocabulary: "), source
    samples = rec.call("samples", batch=rec.batch)
    rows = samples["rows"][:3]
    if expect.per_token:
        assert samples["vocabulary"] == rec.data["vocab_source"]
        for row in rows:
            assert row["target_text"] and row["pred_text"] is not None, row
            assert "<" not in row["target_text"].replace("<eos>", "")  # no id left undecoded
    else:  # one word predicted per sample: the classes are the vocabulary's words
        vocab = rec.data["vocab"]
        assert all(row["target_name"] == vocab[row["target"]] for row in rows), rows
    # The model's input ids read as text where the call is inspected.
    model = rec.info["model"]["roots"][0]
    first = next(c for c in rec.call("find", batch=rec.batch, query=model) if c["name"] == model)
    inputs = rec.call("call", batch=rec.batch, call=first["id"])["inputs"]
    decoded = [a["decoded"] for a in inputs if isinstance(a.get("decoded"), dict)]
    assert decoded and decoded[0].get("text"), inputs


def test_every_script_shows_the_loss_backward_ran_on_with_exact_per_sample_values(run):
    name, expect, rec = run
    detail = rec.call("loss_detail", batch=rec.batch)
    assert detail["fn"] == expect.loss
    assert detail["call"] is not None and detail["call"]["kind"] == "loss"
    assert detail["value"] == pytest.approx(detail["backward_loss"], rel=1e-6)
    table = rec.call("sample_table", batch=rec.batch)
    losses = [r["loss"] for r in table["rows"]]
    assert losses and all(isinstance(v, float) and math.isfinite(v) for v in losses)
    if not expect.per_token:  # one loss per sample, and their mean is the batch's loss
        size = next(b for b in rec.info["batches"] if b["index"] == rec.batch)["batch_size"]
        assert len(losses) == size
        assert sum(losses) / size == pytest.approx(detail["backward_loss"], rel=1e-4)
    replay = rec.call("replay", sample=0, limit=5000)
    assert any(e.get("kind") == "loss" and e.get("batch") == rec.batch for e in replay["events"]), (
        "Replay has no loss step for the first training batch"
    )


def test_a_sequence_first_word_lm_shows_each_sample_its_own_column_of_words(recordings):
    """word_language_model feeds [T, B] columns and flattens its log-probs time-major:
    the batch is B columns, and each sample's text is its own column, not a time step."""
    spec = importlib.util.spec_from_file_location(
        "lstm_lm", SCRIPTS / "lstm_idx2word_dict/train.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    corpus = script.Corpus(script.TEXT)
    data, targets = script.get_batch(script.batchify(corpus.train, 4), 0)
    columns = targets.view(-1, 4).t().tolist()  # the first batch's targets, per sample
    words = corpus.dictionary.idx2word
    assert len({tuple(c) for c in columns}) == 4  # the columns differ, so the split shows
    with LocalClient(recordings["lstm_idx2word_dict"]) as client:
        rec = Run(client)
        size = next(b for b in rec.info["batches"] if b["index"] == rec.batch)["batch_size"]
        assert size == 4
        rows = rec.call("samples", batch=rec.batch)["rows"]
        texts = [row["target_text"] for row in rows]
        assert texts == [" ".join(words[i] for i in column) for column in columns]
        # The model's call shows its input's first sample: column 0 of the [T, B] ids.
        model = rec.info["model"]["roots"][0]
        call = next(c for c in rec.call("find", batch=rec.batch, query=model) if c["name"] == model)
        (tokens, *_) = rec.call("call", batch=rec.batch, call=call["id"])["inputs"]
        assert tokens["decoded"]["text"] == " ".join(words[i] for i in data[:, 0].tolist())
        losses = [r["loss"] for r in rec.call("sample_table", batch=rec.batch)["rows"]]
        detail = rec.call("loss_detail", batch=rec.batch)
    assert len(losses) == 4
    assert sum(losses) / 4 == pytest.approx(detail["backward_loss"], rel=1e-5)


def test_grad_cam_is_shown_for_the_cnn_classifier_and_said_absent_elsewhere(run):
    name, expect, rec = run
    if expect.gradcam:
        cam = rec.call("gradcam", batch=rec.batch)
        assert cam["layers"] and cam["map"].size and cam["map"].max() > 0
        return
    with pytest.raises(AgentError, match="has no Grad-CAM maps"):
        rec.call("gradcam", batch=rec.batch)
    if expect.pixels:
        return  # true: a per-pixel loss has no one class per sample to map
    calls = _rows(rec.call("calls", batch=rec.batch))
    assert not any(c.get("cls") == "Conv2d" for c in calls)  # true: there is no conv to map


def test_every_script_shows_its_followed_sample_as_its_loss_reads_it(run):
    """Tokens for a language model, masks and a per-pixel loss for a segmentation script
    (the unlabeled border ignored, each class's IoU), one row per sample elsewhere."""
    name, expect, rec = run
    detail = rec.call("loss_detail", batch=rec.batch, elements=0)
    view = rec.call("sample_table", batch=rec.batch, sample=0)
    assert detail["per_pixel"] == expect.pixels and (view["kind"] == "pixels") == expect.pixels
    if expect.per_token:
        assert view["kind"] == "tokens" and detail["per_token"]
    if not expect.pixels:
        return
    h, w = view["shape"]
    assert view["target"].shape == view["pred"].shape == view["loss"].shape == (h, w)
    assert view["ignored"][:2].all() and not view["ignored"][2:].any()  # y[:, :2, :] = 255
    assert view["valid_pixels"] == (h - 2) * w and 0 <= view["accuracy"] <= 1
    assert np.isfinite(view["loss"]).all() and view["loss"][2:].min() > 0
    assert set(view["present"]) <= set(range(5))
    assert detail["reduction_check"]["matches"] and "confusion" not in detail
    iou = detail["iou"]
    assert set(iou["batch"]["classes"]) <= set(range(5)) and 0 in iou["batch"]["classes"]
    assert iou["batch"]["total"] == detail["reduction_check"]["terms"]
    assert iou["run"]["batches"] and all(0 <= v <= 1 for v in iou["run"]["iou"])
    rows = rec.call("sample_table", batch=rec.batch)["rows"]
    assert all(0 <= r["accuracy"] <= 1 for r in rows)


async def test_a_run_that_evaluates_first_opens_on_its_first_training_batch(recordings):
    from tvis.agent.target import Target
    from tvis.tui.app import TvisApp
    from tvis.tui.command import Dialer

    runs = recordings["nanogpt_meta_pkl_eval_first"]
    assert isinstance(runs, Path), runs
    with LocalClient(runs) as client:
        rec = Run(client)
    light = rec.info["batches"][0]
    assert light["light"] and light["index"] != rec.batch  # estimate_loss at iteration 0
    target = Target(path=str(runs))
    dialer = Dialer(target)
    dialer.start()
    app = TvisApp(dialer, target.describe(), "halfcell")
    async with app.run_test(size=(120, 40)) as pilot:
        page = await _settle(pilot, lambda: app.current_mode == "replay" and app.screen)
        event = await _settle(pilot, page.current_event)
        assert app.batch == rec.batch and event.batch == rec.batch  # Replay, Explore, Loss
        await pilot.press("comma")  # the evaluation stays one key away
        await _settle(pilot, lambda: app.batch == light["index"])


async def _settle(pilot, predicate, timeout: float = 30.0):
    """``predicate()`` once truthy, letting the app run meanwhile (the suite shares cores)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:
            value = None
        if value:
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {predicate}")


MISFIT_VOCAB = """
import torch
from torch import nn

text = "hello world, hello tvis"
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
itos = {i: ch for i, ch in enumerate(chars)}
vocab_size = len(chars) + 1  # one row more than the mappings hold
model = nn.Sequential(nn.Embedding(vocab_size, 8), nn.Linear(8, vocab_size))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.tensor([stoi[c] for c in text])
for step in range(2):
    x, y = data[:-1].view(2, -1), data[1:].view(2, -1)
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_vocabulary_whose_size_disagrees_with_the_model_is_refused_with_the_reason(tmp_path):
    with LocalClient(record_script(tmp_path, MISFIT_VOCAB, "--steps", "1") / "..") as client:
        rec = Run(client)
        samples = rec.call("samples", batch=rec.batch)
    why = rec.data["vocab_why"]
    assert "vocab" not in rec.data and "vocab_source" not in rec.data
    n = len(set("hello world, hello tvis"))
    assert f"model's {n + 1} token ids" in why and f"itos dict in train.py globals has {n} " in why
    assert samples["vocabulary"] == why and samples["rows"][0]["target_text"] is None


UNSAFE_META = """
import os, pickle
import torch
from torch import nn

data_dir = os.path.join("data", "chars")
os.makedirs(data_dir, exist_ok=True)


class Payload:
    def __reduce__(self):  # unpickling this would create the marker file
        return (open, ("unpickled-marker", "w"))


chars = sorted(set("abcdef"))
with open(os.path.join(data_dir, "meta.pkl"), "wb") as f:
    pickle.dump({"vocab_size": 6, "itos": dict(enumerate(chars)), "hook": Payload()}, f)
del chars
model = nn.Sequential(nn.Embedding(6, 4), nn.Linear(4, 6))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randint(0, 6, (2, 5))
for step in range(2):
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), x.roll(1, 1).flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_meta_pkl_that_is_not_plain_data_is_never_unpickled(tmp_path):
    with LocalClient(record_script(tmp_path, UNSAFE_META, "--steps", "1") / "..") as client:
        rec = Run(client)
    assert not (tmp_path / "unpickled-marker").exists()
    assert "vocab" not in rec.data and "no vocabulary was found" in rec.data["vocab_why"]


RMSE_LOSS = """
import torch
from torch import nn


def rmse(pred, target):
    return ((pred - target) ** 2).mean().sqrt()


torch.manual_seed(0)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 1)
for step in range(2):
    loss = rmse(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_loss_of_the_scripts_own_that_does_not_split_by_sample_says_so(tmp_path):
    with LocalClient(record_script(tmp_path, RMSE_LOSS, "--steps", "1") / "..") as client:
        rec = Run(client)
        detail = rec.call("loss_detail", batch=rec.batch)
        rows = rec.call("sample_table", batch=rec.batch)["rows"]
    assert detail["call"]["name"] == "rmse" and detail["call"]["kind"] == "loss"
    assert "does not split by sample" in detail["per_sample_why"]
    assert all("loss" not in r for r in rows)  # no per-sample value shown that is not exact


ACCUMULATED_OWN_LOSS = """
import torch
from torch import nn


class WeightedMSE(nn.Module):
    def forward(self, pred, target):
        return (3.0 * (pred - target) ** 2).mean()


torch.manual_seed(0)
model = nn.Linear(3, 1)
criterion = WeightedMSE()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
accumulation_steps = 2
for step in range(4):
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    loss = criterion(model(x), y) / accumulation_steps
    loss.backward()
    if (step + 1) % accumulation_steps == 0:
        opt.step()
        opt.zero_grad()
"""


def test_a_loss_of_the_scripts_own_is_found_behind_a_scale_on_the_way_to_backward(tmp_path):
    with LocalClient(record_script(tmp_path, ACCUMULATED_OWN_LOSS, "--steps", "1") / "..") as c:
        rec = Run(c)
        detail = rec.call("loss_detail", batch=rec.batch)
        rows = rec.call("sample_table", batch=rec.batch)["rows"]
    assert detail["fn"] == "WeightedMSE" and detail["reduction"] == "mean"
    assert detail["backward_loss"] == pytest.approx(detail["value"] / 2, rel=1e-6)
    assert len(rows) == 8
    assert sum(r["loss"] for r in rows) / 8 == pytest.approx(detail["value"], rel=1e-5)


def _rows(reply) -> list[dict]:
    return reply["calls"] if isinstance(reply, dict) else reply
