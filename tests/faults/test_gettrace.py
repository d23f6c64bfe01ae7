"""A script that asks ``sys.gettrace()`` inside its loop (to tell whether a debugger is
attached) gets the same answer under tvis as without it, so it trains the same way."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

from tvis.record.builder import Settings
from tvis.record.runner import record

HERE = Path(__file__).resolve().parent


def debugger_attached() -> bool:
    """How training scripts skip slow work (or shrink batches) under a debugger."""
    return sys.gettrace() is not None


def _train(seen: list) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        seen.append(debugger_attached())
        loss = model(torch.randn(3, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_gettrace_in_the_loop_sees_no_tracer_under_tvis(tmp_path):
    plain: list = []
    _train(plain)
    seen: list = []
    outcome = record(lambda: _train(seen), Settings(steps=3), HERE, tmp_path / "run")
    assert outcome.status == "complete"
    assert seen == plain == [False, False, False]
    assert sys.gettrace.__module__ == "sys"  # the interpreter's own again


def test_a_tracer_the_script_sets_is_still_visible(tmp_path):
    def own_tracer(frame, event, arg):
        return None

    def train_with_tracer(seen: list) -> None:
        sys.settrace(own_tracer)
        try:
            seen.append(sys.gettrace() is own_tracer)
        finally:
            sys.settrace(None)
        _train([])

    seen: list = []
    outcome = record(lambda: train_with_tracer(seen), Settings(steps=3), HERE, tmp_path / "run")
    assert outcome.status == "complete" and seen == [True]
