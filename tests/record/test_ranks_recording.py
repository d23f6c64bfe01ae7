"""`tvis run` under `torchrun`: one recording with a run per rank, ranks stopped together,
training bit-identical on every rank, a crashing rank marking only itself, FSDP noticed."""

from __future__ import annotations

import json

from ranks_support import torchrun
from support import ROOT

from tvis.store.reader import RunReader, describe_group, find_runs


def _journal(folder, rank: int) -> list[dict]:
    return [json.loads(line) for line in (folder / f"rank{rank}.jsonl").read_text().splitlines()]


def _ranks(group) -> list[RunReader]:
    return [RunReader(p) for p in find_runs(group)]


def test_losses_and_params_bit_identical_on_every_rank_under_torchrun(ddp_recording):
    for rank in (0, 1):
        recorded = _journal(ddp_recording.recorded, rank)
        assert len(recorded) == 3
        assert recorded == _journal(ddp_recording.plain, rank)  # losses and parameter digests


def test_recording_holds_one_run_per_rank_under_torchrun(ddp_recording):
    group = ddp_recording.group
    assert describe_group(group)["world_size"] == 2
    runs = _ranks(group)
    assert [r.path.name for r in runs] == ["rank0", "rank1"]
    assert [r.meta["rank"]["rank"] for r in runs] == [0, 1]
    assert {r.meta["rank"]["launcher"] for r in runs} == {"torchrun"}
    assert [r.run_id for r in runs] == [f"{group.name}/rank0", f"{group.name}/rank1"]
    assert find_runs(group.parent) == [r.path for r in runs]


def test_every_rank_stops_after_the_same_steps_under_torchrun(ddp_recording):
    runs = _ranks(ddp_recording.group)
    assert [r.status for r in runs] == ["complete", "complete"]
    assert [len(r.index()["steps"]) for r in runs] == [3, 3]
    assert "rank 1 recorded 3 step(s)" in ddp_recording.result.stderr
    recorded_losses = [[s["loss"] for s in r.index()["steps"]] for r in runs]
    journals = [[line["loss"] for line in _journal(ddp_recording.recorded, k)] for k in (0, 1)]
    assert recorded_losses == journals


def test_other_ranks_record_light_by_default(ddp_recording):
    full, light = _ranks(ddp_recording.group)
    assert full.meta["full"] is True and light.meta["full"] is False
    for run, keeps in ((full, True), (light, False)):
        batch = run.batch(run.batch_ids()[0]).record
        step = run.step(0).record
        kept = [t for t in [*batch["tensors"], *step["tensors"]] if t.get("value")]
        assert bool(kept) is keeps
        assert batch["batch"]["loss"] is not None and batch["batch"]["digest"]
        assert all(t["stats"].get("norm") is not None for t in step["tensors"])
        assert all(t["digest"] for t in step["tensors"])
        assert any(c["kind"] == "module" and c["outputs"] for c in batch["calls"])


def test_unused_parameter_has_no_gradient_on_any_rank(ddp_recording):
    for run in _ranks(ddp_recording.group):
        params = {p["name"]: p for p in run.step(0).record["params"]}
        assert params["module.spare.weight"]["grad"] is None
        assert params["module.body.0.weight"]["grad"] is not None


def test_crashing_rank_marks_only_itself_under_torchrun(tmp_path):
    result = torchrun(
        "module",
        ["--steps", "3", "--out", "runs"],
        ["--raise-at", "2", "--steps", "5", "--journal", "j"],
        tmp_path,
    )
    assert result.returncode != 0
    (group,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    rank0, rank1 = _ranks(group)
    assert rank1.status == "failed" and "rank 1 gave up at step 2" in rank1.meta["error"]
    assert len(rank1.index()["steps"]) == 2  # its finished batches and steps are kept
    assert rank0.status in ("failed", "incomplete")  # its peer vanished under it
    assert "rank 1 gave up" not in (rank0.meta.get("error") or "")
    assert len(rank0.index()["steps"]) == 2 and rank0.batch_ids()


def test_fsdp_records_with_a_notice_instead_of_parameter_steps(tmp_path):
    script = ROOT / "tests" / "record" / "scripts" / "fsdp_train.py"
    result = torchrun("module", ["--steps", "2", "--out", "runs"], [], tmp_path, script)
    assert result.returncode == 0, result.stderr
    assert "parameters are sharded (FSDP or DTensor)" in result.stderr
    assert "Grad-CAM is off" in result.stderr  # its extra backward would hang the other rank
    for run in _ranks(next((tmp_path / "runs").iterdir())):
        index = run.index()
        assert run.status == "complete" and len(index["steps"]) == 2
        assert any("sharded (FSDP or DTensor)" in n["text"] for n in index["notices"])
        assert run.step(0).record["params"] == []
        assert not [n for n in index["notices"] if "tvis failed" in n["text"]]
