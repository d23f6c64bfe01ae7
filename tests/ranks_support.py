"""Launching the multi-process test script as users do: real `torchrun` command lines, and
`tvis run` started per rank with SLURM's environment (what `srun tvis run` gives each task)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from support import ROOT, TVIS

DDP_SCRIPT = ROOT / "tests" / "record" / "scripts" / "ddp_train.py"
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
# Two CPU processes with gloo start, rendezvous and train a tiny model in seconds; a loaded
# machine can take a minute, and a hung collective must fail the test, not stall it.
LAUNCH_TIMEOUT = 300
# What the C++ runtime prints when gloo's threads are still joinable as a process exits:
# plain torch does this now and then on a loaded machine, with tvis or without.
TEARDOWN_ABORT = "terminate called without an active exception"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS"):
        env.pop(name, None)
    return env


def torchrun(
    form: str, tvis_args: list[str], script_args: list[str], cwd: Path, script: Path = DDP_SCRIPT
):
    """``torchrun --nproc-per-node 2`` in one of three forms: ``plain`` (no tvis),
    ``module`` (``-m tvis run``) or ``no-python`` (``--no-python tvis run``)."""
    head = [TORCHRUN, "--nproc-per-node", "2", "--master-port", str(free_port())]
    if form == "plain":
        command = [*head, str(script), *script_args]
    elif form == "module":
        command = [*head, "-m", "tvis", "run", *tvis_args, str(script), *script_args]
    else:
        command = [*head, "--no-python", TVIS, "run", *tvis_args, str(script), *script_args]
    for attempt in range(2):
        done = subprocess.run(
            command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=LAUNCH_TIMEOUT
        )
        if done.returncode == 0 or TEARDOWN_ABORT not in done.stderr or attempt:
            return done
        # torch's own abort at exit is not what these tests check: once more, from a clean
        # slate (a real defect fails both times).
        if "--out" in tvis_args:
            shutil.rmtree(cwd / tvis_args[tvis_args.index("--out") + 1], ignore_errors=True)
        command[command.index("--master-port") + 1] = str(free_port())
    return done


def srun_tasks(tvis_args: list[str], script_args: list[str], cwd: Path) -> list:
    """Two `tvis run` tasks as `srun --ntasks 2` starts them (SLURM_* set, no RANK)."""
    port, job = str(free_port()), str(os.getpid())
    procs = []
    for task in range(2):
        env = {
            **_env(),
            "SLURM_PROCID": str(task),
            "SLURM_LOCALID": str(task),
            "SLURM_NTASKS": "2",
            "SLURM_JOB_ID": job,
            "SLURM_STEP_ID": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        command = [TVIS, "run", *tvis_args, str(DDP_SCRIPT), *script_args]
        procs.append(
            subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=LAUNCH_TIMEOUT)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results
