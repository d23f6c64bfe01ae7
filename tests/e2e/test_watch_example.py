"""The long-run example: `tvis run --watch` finds the step a stuck sensor turns to NaN,
thousands of steps in, and the run holds that step in full with the NaN's origin."""

from __future__ import annotations

from pathlib import Path

from support import EXAMPLES, run_tvis

from tvis.store import watch as series_store
from tvis.store.reader import RunReader, find_runs

# One thread: the 2-core test machines run several jobs; threads would only contend.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def test_watch_names_the_nan_step_of_a_long_run_and_records_it(tmp_path):
    folder = EXAMPLES / "sensor_nan"
    result = run_tvis(
        "run", "--watch", "--out", str(tmp_path), "train.py",
        cwd=folder, env=ONE_THREAD, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (run_dir,) = find_runs(tmp_path)
    run = RunReader(Path(run_dir))
    anomaly = run.meta["watch"]["anomaly"]
    step = anomaly["step"]
    assert step >= 2000
    assert f"tvis: anomaly at step {step}: loss became nan at step {step}" in result.stderr
    assert "matched the watch run's loss bit for bit" in result.stderr
    index = run.index()
    assert [s["index"] for s in index["steps"]] == [step - 2, step - 1, step]
    origin = next(a for a in index["anomalies"] if a["kind"] == "nonfinite")["origin"]
    # The stuck recording's standardisation divides zero by a zero std.
    # The project is the repository: files are named from its root.
    assert origin["file"] == "examples/sensor_nan/train.py" and origin["op"] == "div"
    assert "standardize" in origin["path"]
    source = run.sources()[origin["file"]].splitlines()[origin["line"] - 1]
    assert "centred.std(" in source
    series = series_store.read(run.path)
    assert series["steps"] == step + 1
    assert (series["lr"][:step] > 0).all() and series["lr"][100] > series["lr"][10]  # warm-up
