"""Which rank of a multi-process job this process is, and the one recording all ranks share.

Launchers say it in the environment: ``torchrun`` sets ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``
(and ``TORCHELASTIC_RUN_ID``), SLURM's ``srun`` sets ``SLURM_PROCID``/``SLURM_NTASKS``. The
ranks never talk to each other to agree on a folder: each derives the same launch key from
its environment, and the first to arrive names the group folder through an exclusive claim
file that the others read (see tvis/store/format.py, "A recording of several ranks").
Torch-free: `tvis run` decides all this before the script (and torch.distributed) starts.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tvis.store import atomic
from tvis.store.format import GROUP, claim_name, rank_folder

MAX_CLAIMS = 1000
"""Earlier launches with the same launch key a new one steps past (one per reuse of an id)."""


@dataclass(frozen=True)
class RankInfo:
    """This process's place in a multi-process job."""

    rank: int
    local_rank: int
    world_size: int
    launcher: str  # "torchrun" | "slurm" | "env"
    key: str  # the same in every rank of one launch

    def record(self) -> dict:
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "launcher": self.launcher,
        }


def _int(env: dict, name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def detect(env: dict | None = None) -> RankInfo | None:
    """This process's rank from the launcher's environment, or None for a single process."""
    env = dict(os.environ if env is None else env)
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and world is not None:
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        local = _int(env, "LOCAL_RANK")
    else:
        rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
        if rank is None or world is None:
            return None
        launcher, local = "slurm", _int(env, "SLURM_LOCALID")
    if world < 2 or not 0 <= rank < world:
        return None
    return RankInfo(rank, rank if local is None else local, world, launcher, _launch_key(env))


def _launch_key(env: dict) -> str:
    """A digest every rank of one launch computes alike, and a later launch does not."""
    run_id = env.get("TORCHELASTIC_RUN_ID", "none")
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    if run_id not in ("", "none"):
        parts = ["torchrun", run_id, restart]  # --standalone or --rdzv-id: one per launch
    elif "TORCHELASTIC_RUN_ID" in env:
        # A static torchrun launch: its workers share the agent's fresh temporary folder
        # (where their error files go), and are children of that one agent process.
        error_file = env.get("TORCHELASTIC_ERROR_FILE")
        launch = str(Path(error_file).parents[2]) if error_file else os.getppid()
        parts = ["torchrun", env.get("MASTER_ADDR"), env.get("MASTER_PORT"), launch, restart]
    elif "SLURM_JOB_ID" in env:
        parts = ["slurm", env["SLURM_JOB_ID"], env.get("SLURM_STEP_ID", "0")]
    else:
        parts = ["env", env.get("MASTER_ADDR"), env.get("MASTER_PORT"), os.getppid()]
    return hashlib.blake2b(repr(parts).encode(), digest_size=4).hexdigest()


def parse_ranks(text: str) -> frozenset[int] | str:
    """``--ranks``: ``all`` or comma-separated rank numbers (``"all"`` stays a string)."""
    text = text.strip().lower()
    if text == "all":
        return "all"
    try:
        ranks = frozenset(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"--ranks takes 'all' or rank numbers like 0,3, not {text!r}") from None
    if not ranks or min(ranks) < 0:
        raise ValueError(f"--ranks takes 'all' or rank numbers like 0,3, not {text!r}")
    return ranks


def records_fully(info: RankInfo, full: frozenset[int] | str) -> bool:
    return full == "all" or info.rank in full


def rank_run_dir(out: Path, script: Path, info: RankInfo, full: frozenset[int] | str) -> Path:
    """This rank's run folder (created, empty) inside the group folder every rank of the
    launch shares. A launch key met before (a reused ``--rdzv-id``) leads to a group that
    already has this rank: every rank then walks on to the key's next claim, so the ranks
    of the new launch meet again in the first group none of them has written yet."""
    for attempt in range(MAX_CLAIMS):
        key = info.key if attempt == 0 else f"{info.key}-{attempt}"
        path = _join_group(out, script, key, info, full) / rank_folder(info.rank)
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"{MAX_CLAIMS} earlier launches used this launch id; clean up {out}.")


def _join_group(out: Path, script: Path, key: str, info: RankInfo, full) -> Path:
    claim = out / claim_name(key)
    mine = f"{time.strftime('%Y%m%d-%H%M%S')}_{script.stem}_{key}"
    tmp = out / f"{claim.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    tmp.write_text(mine)
    try:
        os.link(tmp, claim)  # atomic and exclusive, also on NFS: exactly one rank wins
        name, won = mine, True
    except FileExistsError:
        # The winner wrote the name before linking, so the claim is never half-written.
        name, won = claim.read_text().strip(), False
    finally:
        tmp.unlink(missing_ok=True)
    group = out / name
    if won:
        _write_group(group, script, info, full)
    else:
        group.mkdir(parents=True, exist_ok=True)
    return group


def _write_group(group: Path, script: Path, info: RankInfo, full) -> None:
    group.mkdir(parents=True, exist_ok=True)
    atomic.write_json(
        group / GROUP,
        {
            "world_size": info.world_size,
            "launcher": info.launcher,
            "script": str(script),
            "full_ranks": "all" if full == "all" else sorted(full),
            "started": time.time(),
        },
    )
