"""The call hook: off while a script sets up, on from the first batch, off after the run."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tvis.record.builder import Settings
from tvis.record.call_hook import SettraceHook
from tvis.record.runner import record_script
from tvis.store.reader import RunReader

SCRIPT = textwrap.dedent(
    """\
    import sys
    import torch


    def set_up():
        return sys.gettrace()


    def train_step(model, opt, x):
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


    seen = set_up()
    with open(sys.argv[1], "w") as f:
        f.write("none" if seen is None else "traced")
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        train_step(model, opt, torch.randn(3, 4))
    """
)

needs_no_tracer = pytest.mark.skipif(
    sys.gettrace() is not None, reason="another tracer (coverage, a debugger) is active"
)


@needs_no_tracer
def test_script_sets_up_untraced_and_trains_traced(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    script = project / "train.py"
    script.write_text(SCRIPT)
    seen = tmp_path / "seen.txt"
    outcome = record_script(script, [str(seen)], Settings(steps=2), project, tmp_path / "runs")
    assert seen.read_text() == "none"  # imports and set-up ran at full speed
    calls = RunReader(outcome.run_dir).batch(1).record["calls"]
    assert any(c["kind"] == "function" and c["name"] == "train_step" for c in calls)
    assert sys.gettrace() is None


@needs_no_tracer
def test_hook_lifted_and_put_back_sees_returns():
    returned = []

    def on_call(frame):
        return returned.append

    def double(x):
        return 2 * x

    hook = SettraceHook(lambda code: code.co_name == "double", on_call)
    hook.start()
    try:
        double(1)
        assert hook.lift() and sys.gettrace() is None
        double(2)  # lifted: not seen
        hook.put_back()
        double(3)
    finally:
        hook.stop()
    assert returned == [2, 6]
    assert sys.gettrace() is None
    hook.put_back()  # stopped: stays off
    assert sys.gettrace() is None
