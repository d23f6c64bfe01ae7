"""Every project line that runs shows its result: lines in a training loop, lines that
only call modules or project functions, and lines of no-grad forwards (marked)."""

from __future__ import annotations

from pathlib import Path

import torch
from helpers import SCRIPTS, record_here
from torch import nn

from tvis.record.builder import Settings
from tvis.record.runner import record_script
from tvis.store.reader import RunReader

SOURCE = Path(__file__).read_text().splitlines()
FILE = "test_line_shapes.py"


def _line_of(marker: str, source=SOURCE) -> int:
    return next(i for i, text in enumerate(source, 1) if text.rstrip().endswith(f"# {marker}"))


def _lines(batch: dict, file: str = FILE) -> dict[int, dict]:
    return {x["line"]: x for x in batch["lines"] if x["file"] == file}


def double(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, x], dim=1)


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)  # calls fc1
        h = double(h)  # calls double
        return self.fc2(h)  # calls fc2


def train_loop(model: nn.Module, opt: torch.optim.Optimizer, steps: int) -> None:
    for _ in range(steps):
        x = torch.randn(5, 6)  # data
        out = model(x)  # forward
        loss = out.square().mean()  # loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            model(torch.randn(2, 6))  # evaluation


def _recorded(loop, tmp_path, batches: int, steps: int) -> RunReader:
    """``loop(model, opt, batches)`` recorded for ``steps`` steps on a seeded TwoLayers."""
    torch.manual_seed(0)
    model = TwoLayers()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    outcome = record_here(lambda: loop(model, opt, batches), tmp_path, steps=steps)
    return RunReader(outcome.run_dir)


def train_then_save(model: nn.Module, opt: torch.optim.Optimizer, steps: int) -> None:
    for _ in range(steps):
        loss = model(torch.randn(5, 6)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.fc2.weight.detach() * 2  # after the loop


def reads_after_ops(model: nn.Module, opt: torch.optim.Optimizer, steps: int) -> None:
    for _ in range(steps):
        x = torch.randn(5, 6)
        flipped = x.T  # a property
        total = torch.tanh(x).sum().item()  # then a number
        where = torch.tanh(x).device  # then a device
        size = x.shape  # no tensor at all
        loss = model(x).square().mean() + 0 * total
        opt.zero_grad()
        loss.backward()
        opt.step()
    del flipped, where, size


def test_a_line_shows_the_op_its_shape_came_from(tmp_path):
    lines = _lines(_recorded(reads_after_ops, tmp_path, batches=2, steps=2).batch(0).record)
    for marker, op, shape in (
        ("a property", "T", [6, 5]),
        ("then a number", "sum", []),
        ("then a device", "tanh", [5, 6]),
    ):
        line = lines[_line_of(marker)]
        assert (line["op"], line["shape"]) == (op, shape), marker
    bare = lines[_line_of("no tensor at all")]
    assert (bare["op"], bare["shape"]) == ("shape", None)


def test_lines_after_the_last_step_join_the_last_batch(tmp_path):
    # The script ends before --steps: its last batch was written with its step, and
    # is written again with the lines that ran after it.
    run = _recorded(train_then_save, tmp_path, batches=2, steps=5)
    last = run.index()["batches"][-1]["index"]
    line = _lines(run.batch(last).record)[_line_of("after the loop")]
    assert (line["op"], line["shape"]) == ("mul", [3, 32])


def test_lines_that_only_call_modules_or_functions_show_their_result(tmp_path):
    batch = _recorded(train_loop, tmp_path, batches=10, steps=2).batch(0).record
    lines = _lines(batch)
    for marker, op, shape in (
        ("calls fc1", "fc1", [5, 16]),
        ("calls double", "double", [5, 32]),
        ("calls fc2", "fc2", [5, 3]),
    ):
        line = lines[_line_of(marker)]
        assert (line["op"], line["shape"], line["dtype"]) == (op, shape, "float32"), marker
        assert line["count"] >= 1 and line["ms"] >= 0


def test_training_loop_lines_show_shapes_in_every_batch(tmp_path):
    run = _recorded(train_loop, tmp_path, batches=10, steps=3)
    train = [b["index"] for b in run.index()["batches"] if not b["light"]]
    assert len(train) == 3
    for index in train:
        lines = _lines(run.batch(index).record)
        assert lines[_line_of("data")]["shape"] == [5, 6]
        assert lines[_line_of("forward")]["shape"] == [5, 3]
        assert lines[_line_of("loss")]["shape"] == []


def test_no_grad_forward_lines_are_marked(tmp_path):
    run = _recorded(train_loop, tmp_path, batches=10, steps=2)
    light = next(b["index"] for b in run.index()["batches"] if b["light"])
    line = _lines(run.batch(light).record)[_line_of("evaluation")]
    assert line["shape"] == [2, 3] and line["no_grad"] is True
    inner = _lines(run.batch(light).record)[_line_of("calls fc2")]
    assert inner["no_grad"] is True


def test_top_level_script_loop_lines_show_shapes(tmp_path):
    script = SCRIPTS / "user_warning.py"
    outcome = record_script(script, [], Settings(steps=2), SCRIPTS, tmp_path)
    assert outcome.status == "complete"
    source = script.read_text().splitlines()
    batch = RunReader(outcome.run_dir).batch(1).record
    lines = _lines(batch, "user_warning.py")
    loop = next(i for i, t in enumerate(source, 1) if "model(torch.randn(3, 4))" in t)
    assert lines[loop]["shape"] is not None
    forward = next(i for i, t in enumerate(source, 1) if "softmax(self.fc(x))" in t)
    assert lines[forward]["shape"] == [3, 2]
