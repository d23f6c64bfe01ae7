"""Two Ctrl-Cs in quick succession end `tvis run` as one does: status 130, the run saved,
no traceback (the second used to land in the middle of saving or in the exit handlers)."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from support import TVIS

from tvis.store.reader import RunReader, find_runs

IN_A_CALLBACK = Path(__file__).resolve().parent / "scripts" / "signal_in_a_callback.py"

SCRIPT = """
    import time
    import torch
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    print("training", flush=True)
    while True:
        loss = model(torch.randn(3, 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.01)
"""


def _ctrl_c_as_in_a_terminal() -> None:
    # A suite started in the background by a shell without job control inherits SIGINT
    # ignored, and so would tvis (as plain python does, it keeps an ignored SIGINT ignored).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("gap", [0.02, 0.04, 0.08])
def test_two_interrupts_apart_by_gap_end_quietly_with_the_run_saved(tmp_path: Path, gap: float):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.Popen(
        [TVIS, "run", "--steps", "1000000", str(script)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "training"
        time.sleep(0.5)  # a few steps recorded
        proc.send_signal(signal.SIGINT)
        time.sleep(gap)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    (run,) = find_runs(tmp_path / "tvis_runs")
    assert RunReader(run).status == "interrupted"


def test_a_ctrl_c_that_lands_in_a_callback_prints_no_traceback(tmp_path: Path):
    """A second Ctrl-C often lands while the first unwinds and frees the script's tensors,
    inside a weakref callback, where Python cannot raise it and prints "Exception ignored
    in …" with a traceback instead; here the script makes that happen."""
    result = subprocess.run(
        [TVIS, "run", "--steps", "10", "--out", str(tmp_path / "runs"), str(IN_A_CALLBACK)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "SIGNAL": "SIGINT"}, preexec_fn=_ctrl_c_as_in_a_terminal,
    )  # fmt: skip
    assert result.returncode == 0 and "done" in result.stdout, result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
