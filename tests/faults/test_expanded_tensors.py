"""Statistics of an expanded (stride-0) tensor come from its storage, each element
weighted by how often it repeats: the same numbers as the materialised tensor, in time
proportional to what is stored, so a huge broadcast costs what its storage costs."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import torch
from support import TVIS

from tvis.record import tensors
from tvis.store.reader import RunReader

SCRIPT = Path(__file__).resolve().parent / "scripts" / "huge_broadcast.py"
# A recording of two tiny steps takes seconds (under a minute on a loaded 2-core machine).
RECORD_TIMEOUT = 180

# Logical elements no machine could hold (4 TB of float32): only storage can be read.
HUGE = 1 << 20


def test_statistics_of_an_expanded_tensor_match_the_materialised_one():
    torch.manual_seed(0)
    base = torch.randn(3, 1, 5)
    base[0, 0, 0] = float("nan")
    base[1, 0, 1] = 0.0
    wide = base.expand(3, 400, 5)
    got, hist = tensors.stats(wide)
    want, want_hist = tensors.stats(wide.contiguous())
    assert got["numel"] == want["numel"] == 6000
    assert got["nan"] == want["nan"] == 400 and got["zeros"] == want["zeros"]
    for key in ("mean", "std", "min", "max", "absmean", "norm"):
        assert math.isclose(got[key], want[key], rel_tol=1e-5), key
    assert hist["counts"] == want_hist["counts"]


def test_recording_a_huge_broadcast_keeps_its_statistics(tmp_path):
    # Reading the logical elements would take hours: the time limit is what fails then.
    done = subprocess.run(
        [TVIS, "run", "--steps", "2", "--out", str(tmp_path), str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=RECORD_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert "tvis failed" not in done.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    batch = RunReader(run).batch(0).record
    masks = [e for e in batch["tensors"] if e["shape"] == [HUGE, HUGE]]
    assert masks and all(e["stats"]["numel"] == HUGE * HUGE for e in masks)
    assert all(e["stats"]["mean"] == 1.0 and e["stats"]["std"] == 0.0 for e in masks)
    assert all(e["stats"]["norm"] == HUGE and sum(e["hist"]["counts"]) == HUGE**2 for e in masks)
