"""The agent compares the ranks of real multi-process recordings: locally, and over ssh
to the loopback sshd lab, with bounded replies."""

from __future__ import annotations

import pytest
from ranks_support import srun_tasks, torchrun

from tvis.agent.client import LocalClient, connect
from tvis.agent.protocol import AgentError
from tvis.agent.target import Target
from tvis.store.reader import RunReader, find_runs

SKIPPED = "body.2.bias"


@pytest.fixture(scope="module")
def manual_group(tmp_path_factory):
    """`torchrun --no-python tvis run --ranks all` over a script that all-reduces every
    gradient by hand except one."""
    work = tmp_path_factory.mktemp("manual")
    result = torchrun(
        "no-python",
        ["--steps", "2", "--out", "runs", "--ranks", "all"],
        ["--mode", "manual", "--skip-reduce", SKIPPED, "--steps", "4", "--journal", "j"],
        work,
    )
    assert result.returncode == 0, result.stderr
    return work / "runs"


@pytest.fixture(scope="module")
def srun_group(tmp_path_factory):
    """Two `srun`-started `tvis run` tasks over a DDP script without a DistributedSampler,
    whose spare layer only rank 0 calls."""
    work = tmp_path_factory.mktemp("srun")
    results = srun_tasks(
        ["--steps", "2", "--out", "runs"],
        ["--sampler", "none", "--unused", "--spare-on-rank0", "--steps", "3", "--journal", "j"],
        work,
    )
    for result in results:
        assert result.returncode == 0, result.stderr
    return work / "runs"


def _first_rank(root) -> str:
    return LocalClient(root).call("runs")[0]["run"]


def test_ranks_lists_each_rank_with_its_loss_per_step(ddp_recording):
    client = LocalClient(ddp_recording.group.parent)
    reply = client.call("ranks", run=_first_rank(ddp_recording.group.parent))
    assert [r["rank"] for r in reply["ranks"]] == [0, 1]
    assert [r["full"] for r in reply["ranks"]] == [True, False]
    assert reply["world_size"] == 2 and reply["first_failure"] is None
    losses = [row["losses"] for row in reply["loss"]]
    recorded = [
        [s["loss"] for s in RunReader(p).index()["steps"]] for p in find_runs(ddp_recording.group)
    ]
    assert losses == [list(pair) for pair in zip(*recorded, strict=True)]
    assert losses[0][0] != losses[0][1]  # a DistributedSampler gives each rank its own data
    assert reply["same_batches"]["batches"] == [] and reply["same_batches"]["compared"] == 6


def test_ranks_finds_ddp_gradients_identical_and_the_unused_parameter(ddp_recording):
    reply = LocalClient(ddp_recording.group.parent).call(
        "ranks", run=_first_rank(ddp_recording.group.parent)
    )
    grads = reply["grads"]
    assert grads["first"] is None and grads["differ"] == 0 and grads["compared"] == 3 * 4
    unused = {u["rank"]: u["params"] for u in reply["unused"]}
    assert unused == {0: ["module.spare.weight", "module.spare.bias"]} | {
        1: ["module.spare.weight", "module.spare.bias"]
    }


def test_ranks_reports_time_per_phase_per_rank(ddp_recording):
    reply = LocalClient(ddp_recording.group.parent).call(
        "ranks", run=_first_rank(ddp_recording.group.parent)
    )
    for phases in reply["phases"]:
        assert phases["batches"] == 3
        assert phases["forward"] > 0 and phases["backward"] > 0
        assert phases["total"] >= phases["forward"] + phases["backward"]
    assert reply["straggler"]["rank"] in (0, 1) and reply["straggler"]["ratio"] >= 1


def test_ranks_flags_the_first_gradient_not_all_reduced(manual_group):
    client = LocalClient(manual_group)
    run = _first_rank(manual_group)
    reply = client.call("ranks", run=run)
    first = reply["grads"]["first"]
    assert first["name"] == SKIPPED and first["step"] == 0
    assert len(first["norms"]) == 2 and first["norms"][0] != first["norms"][1]
    assert reply["grads"]["differ"] == 2  # the same parameter at each of the 2 steps
    assert [r["full"] for r in reply["ranks"]] == [True, True]  # --ranks all
    rows = client.call("rank_params", run=run, step=1)["rows"]
    assert [r["name"] for r in rows if r["same"] is False] == [SKIPPED]


def test_ranks_finds_batches_identical_across_ranks_under_srun(srun_group):
    client = LocalClient(srun_group)
    runs = client.call("runs")
    assert [r["rank"] for r in runs] == [0, 1]
    reply = client.call("ranks", run=runs[1]["run"])
    assert reply["launcher"] == "slurm"
    shared = reply["same_batches"]["batches"]
    assert [row["ranks"] for row in shared] == [[[0, 1]], [[0, 1]]]
    assert [row["losses"][0] == row["losses"][1] for row in reply["loss"]] == [False, False]


def test_ranks_finds_a_parameter_unused_on_one_rank_only(srun_group):
    client = LocalClient(srun_group)
    run = client.call("runs")[0]["run"]
    reply = client.call("ranks", run=run)
    assert reply["unused"] == [
        {"rank": 1, "count": 2, "params": ["module.spare.weight", "module.spare.bias"]}
    ]
    assert reply["grads"]["first"] is None  # DDP gave rank 1 the same averaged gradient
    rows = {r["name"]: r for r in client.call("rank_params", run=run, step=0)["rows"]}
    assert rows["module.spare.weight"]["has_grad"] == [True, False]
    assert rows["module.spare.weight"]["same"] is True


def test_rank_params_pages_are_bounded(manual_group):
    client = LocalClient(manual_group)
    reply = client.call("rank_params", run=_first_rank(manual_group), step=0, offset=1, limit=2)
    assert reply["total"] == 4 and len(reply["rows"]) == 2 and reply["ranks"] == [0, 1]


def test_ranks_of_a_single_process_run_is_one_sentence(recorded_run):
    client = LocalClient(recorded_run.parent)
    with pytest.raises(AgentError) as e:
        client.call("ranks", run=recorded_run.name)
    assert e.value.status == 404 and "not one rank" in e.value.message
    assert client.call("run", run=recorded_run.name)["ranks"] == []


def test_run_names_its_sibling_ranks(ddp_recording):
    client = LocalClient(ddp_recording.group.parent)
    name = _first_rank(ddp_recording.group.parent)
    info = client.call("run", run=name)
    assert info["rank"]["rank"] == 0
    assert [r["rank"] for r in info["ranks"]] == [0, 1]


def test_ranks_over_ssh_equal_local(ssh_lab, ddp_recording):
    root = ddp_recording.group.parent
    target = Target(path=str(root), host="tvis-test", remote_tvis=ssh_lab.remote_tvis)
    name = _first_rank(root)
    with connect(target, ssh_command=ssh_lab.ssh_command, control_dir=ssh_lab.control_dir()) as c:
        far = c.call("ranks", run=name)
        far_params = c.call("rank_params", run=name, step=0)
    near = LocalClient(root)
    assert far == near.call("ranks", run=name)
    assert far_params == near.call("rank_params", run=name, step=0)
