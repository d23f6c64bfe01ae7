"""Where a run went wrong: the first non-finite value in forward and backward, and the
closing summary of `tvis run`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import SCRIPTS, record_here
from support import run_tvis
from torch import nn

from tvis.store.reader import RunReader

SOURCE = Path(__file__).read_text().splitlines()


def _line_of(marker: str) -> int:
    return next(i for i, text in enumerate(SOURCE, 1) if marker in text and "_line_of" not in text)


class Net(nn.Module):
    def __init__(self, bad: str) -> None:
        super().__init__()
        self.bad = bad
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        if self.bad == "log":
            h = torch.log(h)  # marker: log
        elif self.bad == "div":
            h = h / (h - h)  # marker: div
        elif self.bad == "exp":
            h = torch.exp(h * 1e4)  # marker: exp
        elif self.bad == "mask":  # infinities on purpose, gone after the softmax
            h = h.masked_fill(h < 0, float("-inf")).softmax(dim=-1)
        elif self.bad == "sqrt_backward":
            h = torch.sqrt(h - h) + h  # marker: sqrt_backward
        return self.fc2(h)


def _record(tmp_path, bad: str, nan_input: bool = False):
    torch.manual_seed(0)
    model = Net(bad)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train():
        for _ in range(10):
            x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
            if nan_input:
                x[1, 3] = float("nan")
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    outcome = record_here(train, tmp_path, steps=2)
    return outcome, RunReader(outcome.run_dir)


@pytest.mark.parametrize("bad,op", [("log", "log"), ("div", "div"), ("exp", "exp")])
def test_first_nonfinite_op_is_pinpointed_in_forward(tmp_path, bad, op):
    outcome, run = _record(tmp_path, bad)
    batch = run.batch(0).record
    origin = batch["anomalies"]["nonfinite"]
    assert origin["kind"] == "op" and origin["op"] == op
    assert (origin["file"], origin["line"]) == ("test_anomalies.py", _line_of(f"marker: {bad}"))
    assert "Net" in origin["path"]
    assert "nonfinite_origin" in batch["calls"][origin["call"]]["flags"]
    line = next(x for x in batch["lines"] if x["line"] == origin["line"])
    assert "nonfinite_origin" in line["flags"]
    fc2 = next(c for c in batch["calls"] if c["name"] == "fc2")
    assert "nonfinite_origin" not in fc2["flags"]  # fc2 only passed it on
    texts = " | ".join(outcome.anomalies)
    assert f"first non-finite value: test_anomalies.py:{origin['line']} {op}" in texts
    kinds = {a["kind"] for a in run.index()["anomalies"]}
    assert {"loss_nonfinite", "nonfinite"} <= kinds


def test_nan_input_batch_is_named_as_the_origin(tmp_path):
    outcome, run = _record(tmp_path, "none", nan_input=True)
    origin = run.batch(0).record["anomalies"]["nonfinite"]
    assert origin["kind"] == "input"
    assert any("the input" in text and "already held NaN/Inf" in text for text in outcome.anomalies)


def test_first_nonfinite_gradient_is_pinpointed_in_backward(tmp_path):
    outcome, run = _record(tmp_path, "sqrt_backward")
    batch = run.batch(0).record
    assert "nonfinite" not in batch.get("anomalies", {})  # the forward is finite
    origin = batch["anomalies"]["nonfinite_grad"]
    assert origin["phase"] == "backward"
    assert (origin["file"], origin["line"]) == (
        "test_anomalies.py",
        _line_of("marker: sqrt_backward"),
    )
    assert "nonfinite_grad_origin" in batch["calls"][origin["call"]]["flags"]
    assert any(text.startswith("first non-finite gradient:") for text in outcome.anomalies)


@pytest.mark.parametrize("model", ["none", "mask"])
def test_healthy_run_reports_no_anomaly(tmp_path, model):
    outcome, run = _record(tmp_path, model)
    assert outcome.anomalies == ()
    assert "anomalies" not in run.batch(0).record


class _HalfUsed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used, self.unused = nn.Linear(4, 1), nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def test_unused_parameter_is_reported_as_never_receiving_a_gradient(tmp_path):
    torch.manual_seed(0)
    model = _HalfUsed()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train():
        for _ in range(5):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()

    outcome = record_here(train, tmp_path, steps=2)
    assert any(
        "2 parameter(s) never received a gradient: unused.bias, unused.weight" in text
        for text in outcome.anomalies
    )


def test_tvis_run_ends_with_the_anomaly_summary(tmp_path):
    result = run_tvis(
        "run",
        "--out",
        str(tmp_path),
        "--steps",
        "2",
        str(SCRIPTS / "nan_from_log.py"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "tvis: anomaly: loss became nan at step 0 (batch 0)" in lines
    origin = next(line for line in lines if "first non-finite value" in line)
    source = (SCRIPTS / "nan_from_log.py").read_text().splitlines()
    log_line = next(i for i, text in enumerate(source, 1) if "torch.log(h)" in text)
    assert f"nan_from_log.py:{log_line} log in Net (Net)" in origin
    assert lines[-3].startswith("tvis: run saved in ")


@pytest.mark.parametrize(
    ("norms", "text"),
    [
        ([(0, 1.0), (1, 2.0), (2, 500.0)], "gradient norm exploded at step 2: 500 (step 0: 1)"),
        (
            [(0, 1.0), (1, float("nan"))],
            "gradient norm became non-finite at step 1: nan (step 0: 1)",
        ),
        (
            [(0, float("nan")), (1, float("nan"))],
            "gradient norm was non-finite from step 0 on: nan",
        ),
    ],
)
def test_the_gradient_norm_sentence_names_the_first_bad_step(norms, text):
    from tvis.record.anomalies import summary

    assert [a["text"] for a in summary(None, [], norms, {})] == [text]
    assert summary(None, [], [(0, 1.0), (1, 3.0)], {}) == []
