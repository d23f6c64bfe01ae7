"""Training on another thread is recorded, and the script is stopped after N steps."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from support import TVIS

from tvis.store.reader import RunReader

SCRIPT = Path(__file__).resolve().parent / "scripts" / "threaded_training.py"


def test_training_thread_is_recorded_and_stopped_after_n_steps(tmp_path):
    plain = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    done = subprocess.run(
        [TVIS, "run", "--steps", "3", "--out", str(tmp_path), str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=300,
        # The stop reaches the script's thread as a simulated Ctrl-C: SIGINT must be Python's
        # even when this suite runs in the background of a shell without job control.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception in thread" not in done.stderr
    assert "recorded 3 step(s), 3 batch(es)" in done.stderr
    assert "trains on thread 'trainer'" in done.stderr
    # Same losses as plain python, and nothing after the stop ran.
    assert done.stdout.splitlines() == plain.stdout.splitlines()[:2]  # stopped in step 3
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    reader = RunReader(run)
    assert reader.status == "complete"
    index = reader.index()
    assert [b["step"] for b in index["batches"] if not b["light"]] == [0, 1, 2]
    assert any(c["cls"] == "Linear" for c in reader.batch(0).record["calls"])
    # Project functions are traced on the training thread from its first forward on.
    assert "helper_scale" in {c["name"] for c in reader.batch(1).record["calls"]}
