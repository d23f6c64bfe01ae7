"""Scripts written the way public training code is (scripts/<name>/train.py), recorded with
`tvis run` as a user runs them, and every page that applies to each checked through the
agent: decoded text for every language model (with the vocabulary it came from), the loss
and its per-sample values for every script, Grad-CAM for the CNN classifier, and the
first training batch where training starts after an evaluation.

A page that should have content and says it has none fails here; so does a "nothing here"
sentence that is not true of the script.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tvis.agent.client import LocalClient
from tvis.agent.protocol import AgentError

SCRIPTS = Path(__file__).resolve().parent / "scripts"
TVIS = str(Path(sys.executable).with_name("tvis"))


@dataclass(frozen=True)
class Expect:
    """What a reader of the script knows it holds."""

    vocab: str | None = None  # where its vocabulary is, as the run must name it
    per_token: bool = False  # a language model predicting every position
    loss: str = "cross_entropy"  # the loss function or class backward ran on
    gradcam: bool = False  # a CNN classifier


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
    "cnn_label_smoothing_own_class": Expect(loss="LabelSmoothingCrossEntropy", gradcam=True),
    "regression_pow_mean": Expect(loss="mean"),
    "custom_loss_module": Expect(loss="FocalLoss"),
}


def _record(name: str, root: Path) -> tuple[str, Path | str]:
    work = root / name
    work.mkdir()
    result = subprocess.run(
        [TVIS, "run", "--steps", "2", "--out", "runs", str(SCRIPTS / name / "train.py")],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    if result.returncode != 0 or "tvis failed" in result.stderr:
        return name, result.stderr
    return name, work / "runs"


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path | str]:
    """Each script recorded once (three at a time): its runs folder, or what went wrong."""
    root = tmp_path_factory.mktemp("wild")
    with ThreadPoolExecutor(3) as pool:
        return dict(pool.map(lambda n: _record(n, root), EXPECT))


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


def test_grad_cam_is_shown_for_the_cnn_classifier_and_said_absent_elsewhere(run):
    name, expect, rec = run
    if expect.gradcam:
        cam = rec.call("gradcam", batch=rec.batch)
        assert cam["layers"] and cam["map"].size and cam["map"].max() > 0
        return
    with pytest.raises(AgentError, match="has no Grad-CAM maps"):
        rec.call("gradcam", batch=rec.batch)
    calls = _rows(rec.call("calls", batch=rec.batch))
    assert not any(c.get("cls") == "Conv2d" for c in calls)  # true: there is no conv to map


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
        assert app.batch == rec.batch and event["batch"] == rec.batch  # Replay, Explore, Loss
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


def _rows(reply) -> list[dict]:
    return reply["calls"] if isinstance(reply, dict) else reply
