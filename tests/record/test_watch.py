"""`tvis run --watch`: the light per-step series, the stop at the first anomaly, and the
re-run that records the anomalous step in full."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support import run_tvis
from training import setup, train

from tvis.record.watch import Watch, parse_checks
from tvis.store import watch as series_store
from tvis.store.reader import RunReader, find_runs

SCRIPT = """
import sys, torch
torch.manual_seed(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randn(64, 1)
steps, bad = int(sys.argv[1]), sys.argv[2]
for step in range(steps):
    i = torch.randint(0, 64, (16,))
    batch, target = x[i].clone(), y[i]
    if bad == "nan" and step == 41:
        batch[3, 2] = float("nan")  # one poisoned sample
    if bad == "spike" and step == 55:
        target = target * 1000.0  # mislabelled targets
    loss = torch.nn.functional.mse_loss(model(batch), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("finished", flush=True)
"""


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return script


def _run(tmp_path: Path) -> RunReader:
    (run_dir,) = find_runs(tmp_path / "tvis_runs")
    return RunReader(Path(run_dir))


def test_nan_step_is_named_and_recorded_in_full(tmp_path):
    script = _script(tmp_path)
    result = run_tvis("run", "--watch", str(script), "100", "nan", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "finished" not in result.stdout
    assert "tvis: anomaly at step 41: loss became nan at step 41" in result.stderr
    assert "tvis: anomaly: loss became nan at step 41 (batch 2)" in result.stderr
    assert "matched the watch run's loss bit for bit at all 39 steps" in result.stderr
    run = _run(tmp_path)
    assert run.status == "complete"
    assert run.meta["watch"]["anomaly"]["step"] == 41 and run.meta["from_step"] == 39
    assert [s["index"] for s in run.index()["steps"]] == [39, 40, 41]
    kinds = {a["kind"]: a for a in run.index()["anomalies"]}
    assert kinds["nonfinite"]["origin"]["kind"] == "input"
    series = series_store.read(run.path)
    assert series["steps"] == 42 and series["anomaly"]["kind"] == "loss_nonfinite"
    assert torch.isnan(torch.tensor(series["loss"][41])) and series["loss"][:41].min() > 0
    # The recorded losses are the watch run's, bit for bit.
    for step in run.index()["steps"][:2]:
        assert step["loss"] == series["loss"][step["index"]]


def test_script_ending_without_anomaly_keeps_the_series(tmp_path):
    script = _script(tmp_path)
    result = run_tvis("run", "--watch", str(script), "80", "none", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "finished" in result.stdout  # the script ran to its end
    assert "tvis: no anomaly in 80 steps" in result.stderr
    run = _run(tmp_path)
    assert run.status == "complete" and run.meta["watch"]["anomaly"] is None
    series = series_store.read(run.path)
    assert series["steps"] == 80 and (series["lr"] == 0.05).all() and (series["ms"] > 0).all()
    assert (series["grad_norm"] > 0).all() and series["nonfinite"] == []


def test_spike_is_an_anomaly_only_when_asked(tmp_path):
    script = _script(tmp_path)
    out = str(tmp_path / "watch_only")
    plain = run_tvis("run", "--watch", "--out", out, str(script), "70", "spike", cwd=tmp_path)
    assert "no anomaly in 70 steps" in plain.stderr, plain.stderr
    spiked = run_tvis("run", "--watch=nan,spike", str(script), "70", "spike", cwd=tmp_path)
    assert "tvis: anomaly at step 55: loss spiked to" in spiked.stderr, spiked.stderr
    assert "× the median" in spiked.stderr
    run = _run(tmp_path)
    assert [s["index"] for s in run.index()["steps"]] == [53, 54, 55]


def test_rerun_that_diverges_says_where(tmp_path):
    script = tmp_path / "train.py"
    # Seeded from the clock: the re-run trains on different numbers.
    script.write_text(SCRIPT.replace("torch.manual_seed(", "torch.seed() or ("))
    result = run_tvis("run", "--watch", str(script), "100", "nan", cwd=tmp_path)
    assert "the script is not deterministic: re-run, its loss at step 0 was" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--watch=nan,wobble"], "--watch takes nan and spike, not wobble."),
        (["--watch", "--from-step", "3"], "--watch and --from-step do not go together"),
        (["--from-step", "-1"], "--from-step must be 0 or more (got -1)."),
    ],
)
def test_bad_watch_options_are_one_sentence(tmp_path, args, message):
    script = _script(tmp_path)
    result = run_tvis("run", *args, str(script), "10", "none", cwd=tmp_path)
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_watching_never_changes_training(tmp_path):
    model, opt, loader = setup()
    plain: list = []
    train(model, opt, loader, 6, plain)
    model, opt, loader = setup()
    watched: list = []
    watch = Watch(tmp_path, parse_checks("nan,spike"))
    watch.install()
    try:
        train(model, opt, loader, 6, watched)
    finally:
        watch.uninstall()
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(plain, watched, strict=True))
    assert watch.series.loss == [float(a) for a, _ in plain]
    assert torch.autograd.backward.__module__ == "torch.autograd"  # nothing left installed


def test_series_of_thousands_of_steps_takes_kilobytes(tmp_path):
    series = series_store.Series()
    for i in range(2000):
        series.loss.append(1.0 / (i + 1))
        series.grad_norm.append(0.5)
        series.lr.append(1e-3)
        series.ms.append(6.0)
    series_store.write(tmp_path, series)
    assert (tmp_path / series_store.WATCH).stat().st_size < 60_000
    back = series_store.read(tmp_path)
    assert back["steps"] == 2000 and back["loss"][1999] == 1.0 / 2000


def test_corrupt_series_is_one_sentence(tmp_path):
    (tmp_path / series_store.WATCH).write_bytes(b"\x81\xa5steps\x05")
    with pytest.raises(ValueError, match="corrupt"):
        series_store.read(tmp_path)


def test_watch_before_a_script_that_takes_tvis_like_options(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import argparse\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--steps', type=int)\n"
        "args = p.parse_args()\n"
        + SCRIPT.replace("int(sys.argv[1]), sys.argv[2]", "args.steps, 'none'")
    )
    result = run_tvis("run", "--watch", str(script), "--steps", "30", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "tvis: no anomaly in 30 steps" in result.stderr
    spaced = run_tvis("run", "--watch", "nan,spike", str(script), "--steps", "25", cwd=tmp_path)
    assert "tvis: no anomaly in 25 steps" in spaced.stderr, spaced.stderr


def test_bare_except_cannot_swallow_the_watchs_stop(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        SCRIPT.replace("    loss = torch", "    try:\n        loss = torch")
        .replace("    opt.zero_grad()", "        opt.zero_grad()")
        .replace("    loss.backward()", "        loss.backward()")
        .replace("    opt.step()", "        opt.step()\n    except BaseException:\n        pass")
    )
    result = run_tvis("run", "--watch", str(script), "100", "nan", cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "finished" not in result.stdout  # code after the loop did not run
    assert "tvis: anomaly at step 41: loss became nan at step 41" in result.stderr
    run = _run(tmp_path)
    assert [s["index"] for s in run.index()["steps"]] == [39, 40, 41]
    assert series_store.read(run.path)["steps"] == 42


def test_grad_scaler_loss_is_watched_in_the_optimizers_units(tmp_path):
    def train_scaled(steps: int) -> list[float]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        losses = []
        for _ in range(steps):
            x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
        return losses

    plain = train_scaled(4)
    watch = Watch(tmp_path, ["nan"])
    watch.install()
    try:
        watched = train_scaled(4)
    finally:
        watch.uninstall()
    assert watched == plain
    assert watch.series.loss == plain  # not loss × 65536
