"""How `tvis run` finds its rank and the folder all ranks of one launch share (no torch)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tvis.record.ranks import detect, parse_ranks, rank_run_dir, records_fully
from tvis.store.reader import describe_group, find_runs

TORCHRUN_ENV = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "none",
    "TORCHELASTIC_RESTART_COUNT": "0",
    "TORCHELASTIC_ERROR_FILE": "/tmp/torchelastic_ab/none_cd/attempt_0/1/error.json",
}


def test_rank_comes_from_torchrun_environment():
    info = detect(TORCHRUN_ENV)
    assert (info.rank, info.local_rank, info.world_size, info.launcher) == (1, 1, 2, "torchrun")


def test_rank_comes_from_slurm_environment():
    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "77"}
    info = detect(env)
    assert (info.rank, info.local_rank, info.world_size, info.launcher) == (3, 1, 4, "slurm")


@pytest.mark.parametrize(
    "env", [{}, {"RANK": "0", "WORLD_SIZE": "1"}, {"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}]
)
def test_single_process_is_not_a_rank(env):
    assert detect(env) is None


def test_ranks_of_one_launch_share_a_key_and_the_next_launch_does_not():
    rank0 = detect({**TORCHRUN_ENV, "RANK": "0", "LOCAL_RANK": "0"})
    rank1 = detect(TORCHRUN_ENV)
    later = detect(
        {**TORCHRUN_ENV, "TORCHELASTIC_ERROR_FILE": "/tmp/torchelastic_zz/none_yy/attempt_0/1/e"}
    )
    assert rank0.key == rank1.key != later.key


def test_ranks_flag_parses_lists_and_all_and_refuses_the_rest():
    assert parse_ranks("0,3") == frozenset({0, 3}) and parse_ranks("ALL") == "all"
    for bad in ("", "x", "-1", "0;1"):
        with pytest.raises(ValueError, match="--ranks takes"):
            parse_ranks(bad)
    info = detect(TORCHRUN_ENV)
    assert not records_fully(info, frozenset({0})) and records_fully(info, "all")


def test_ranks_arriving_together_join_one_group_folder(tmp_path: Path):
    infos = [
        detect({**TORCHRUN_ENV, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "8"})
        for r in range(8)
    ]
    script = tmp_path / "train.py"
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda i: rank_run_dir(tmp_path, script, i, frozenset({0})), infos))
    assert len({p.parent for p in paths}) == 1
    assert [p.name for p in paths] == [f"rank{r}" for r in range(8)]
    assert describe_group(paths[0].parent)["world_size"] == 8
    assert find_runs(tmp_path) == []  # no run is listed before a rank writes its meta


def test_a_reused_launch_id_starts_a_new_group_that_every_rank_joins(tmp_path: Path):
    infos = [detect({**TORCHRUN_ENV, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in (0, 1)]
    script = tmp_path / "train.py"
    first = [rank_run_dir(tmp_path, script, i, frozenset({0})) for i in infos]
    again = [rank_run_dir(tmp_path, script, i, frozenset({0})) for i in reversed(infos)]
    assert first[0].parent == first[1].parent
    assert again[0].parent == again[1].parent != first[0].parent
    assert sorted(p.name for p in again) == ["rank0", "rank1"]
