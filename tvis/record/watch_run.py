"""`tvis run --watch`: train with the light watch on, then record the anomalous step in full.

The watch run stops at the first anomaly (tvis/record/watch.py). The step is then recorded
by running the script again in a fresh process, fast-forwarded with ``--from-step`` to
BEFORE steps ahead of it: a process whose training state has gone NaN cannot step back,
and a fresh one rebuilds everything the recorder needs to see (the model's construction
and names, the data pipeline) exactly as a plain recording does. The re-run compares each
step's loss bits with the watch series and says where it diverged, if it does.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tvis.record.builder import Settings
from tvis.record.ranks import detect, parse_ranks, rank_run_dir
from tvis.record.stop import StopRecording
from tvis.record.watch import Watch, parse_checks
from tvis.store import atomic
from tvis.store import watch as series_store
from tvis.store.format import COMPLETE, FAILED, FORMAT_VERSION, INTERRUPTED, META, RUNNING

# Steps recorded before the anomalous one: the last healthy update and the one before it
# show what led there (a learning rate, a growing gradient), and three steps stay small.
BEFORE = 2

# Options of `tvis run` the re-run passes on as given (what and how to record).
_PASSED = {
    "samples": "--samples",
    "max_elems": "--max-elems",
    "param_elems": "--param-elems",
    "max_batches": "--max-batches",
    "max_bytes": "--max-bytes",
    "ranks": "--ranks",
}
_SWITCHES = {
    "no_functions": "--no-functions",
    "no_ops": "--no-ops",
    "no_gradcam": "--no-gradcam",
    "no_attention": "--no-attention",
    "exact": "--exact",
}


def watch_script(
    args: argparse.Namespace, script: Path, settings: Settings, project: Path, out: Path
) -> int:
    """Run the script under the watch; on an anomaly, record it in full by a re-run."""

    from tvis.record.runner import (
        _exit_code,
        _main_module,
        _run_main,
        _user_traceback,
        process_meta,
        run_dir_for,
    )

    checks = parse_checks(args.watch)
    rank = detect()
    if rank is not None:
        run_dir = rank_run_dir(out, script, rank, parse_ranks(args.ranks))
    else:
        run_dir = run_dir_for(out, script)
        run_dir.mkdir(parents=True)
    watch_meta = {"checks": checks, "factor": args.spike_factor, "window": args.spike_window}
    meta = {
        "format": FORMAT_VERSION,
        "status": RUNNING,
        "started": time.time(),
        "script": str(script),
        "argv": list(args.args),
        **process_meta(settings, project),
        "watch": watch_meta,
    }
    if rank is not None:
        meta["rank"] = rank.record()
    atomic.write_json(run_dir / META, meta)
    watch = Watch(run_dir, checks, args.spike_factor, args.spike_window)
    started = time.perf_counter()

    def hard_stop() -> None:
        # The script swallowed the stop (a bare `except:` around its step) and kept
        # training: finish here, as if it had stopped, and end the process.
        watch.uninstall()
        sys.stdout.flush()
        code = _finish(
            args, script, project, out, run_dir, meta, watch, rank, started, (COMPLETE, 0, None)
        )
        sys.stderr.flush()
        os._exit(code)

    watch.on_hard_stop = hard_stop

    module = _main_module(script)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *args.args]
    sys.path.insert(0, str(script.parent))
    status, exit_code, error = COMPLETE, 0, None
    try:
        watch.install()
        _run_main(script, module)
    except StopRecording:
        pass
    except SystemExit as e:
        exit_code = _exit_code(e.code)
        if exit_code:
            status, error = FAILED, f"the script exited with code {exit_code}"
    except KeyboardInterrupt:
        status, exit_code, error = INTERRUPTED, 130, "interrupted (Ctrl-C)"
    except BaseException:
        status, exit_code = FAILED, 1
        error = _user_traceback()
        sys.stderr.write(error)
    finally:
        watch.uninstall()
        sys.argv, sys.path[:] = saved_argv, saved_path
    return _finish(
        args, script, project, out, run_dir, meta, watch, rank, started, (status, exit_code, error)
    )


def _finish(args, script, project, out, run_dir, meta, watch, rank, started, ended) -> int:
    """After the watched script: the series and meta written, and on an anomaly the
    re-run that records it; the exit code of `tvis run`."""
    status, exit_code, error = ended
    watch_meta = meta["watch"]
    seconds = time.perf_counter() - started
    watch.flush()
    series = watch.series
    anomaly = series.anomaly
    watch_meta.update(steps=series.steps, anomaly=anomaly, seconds=seconds)
    err = sys.stderr
    who = f"rank {rank.rank}: " if rank is not None and rank.rank else ""
    if anomaly is None:
        meta.update(status=status, exit_code=exit_code, error=error, ended=time.time())
        atomic.write_json(run_dir / META, meta)
        if status == COMPLETE:
            print(f"\ntvis: {who}no anomaly in {series.steps:,} steps ({seconds:.1f} s)", file=err)
        else:
            print(f"\ntvis: {who}watched {series.steps:,} steps; the script {status}", file=err)
        print(f"tvis: watch series saved in {run_dir}", file=err)
        return exit_code
    step = anomaly["step"]
    first = max(0, step - BEFORE)
    atomic.write_json(run_dir / META, meta)
    if not who:
        print(f"\ntvis: anomaly at step {step}: {anomaly['text']}", file=err)
        print(
            f"tvis: watched {series.steps:,} steps in {seconds:.1f} s; recording steps "
            f"{first}–{step} in full: running the script again to step {first} …",
            file=err,
        )
    env = _rerun_env()
    command = [sys.executable, "-m", "tvis", "run", "--from-step", str(first)]
    command += ["--steps", str(step - first + 1), "--into", str(run_dir)]
    command += _recording_flags(args, project, out)
    command += [str(script), *args.args]
    rerun_started = time.perf_counter()
    result = subprocess.run(command, env=env, stdout=subprocess.DEVNULL)
    if not who:
        print(
            f"tvis: the re-run took {time.perf_counter() - rerun_started:.1f} s "
            f"(the watch run {seconds:.1f} s)",
            file=err,
        )
    return result.returncode


def _recording_flags(args: argparse.Namespace, project: Path, out: Path) -> list[str]:
    # --project only as given: without it the re-run keeps the wide default project.
    flags = ["--out", str(out)] + (["--project", str(project)] if args.project else [])
    for name, flag in _PASSED.items():
        flags += [flag, str(getattr(args, name))]
    flags += [flag for name, flag in _SWITCHES.items() if getattr(args, name)]
    return flags


def _rerun_env() -> dict[str, str]:
    """The environment of the re-run: this one, with a fresh rendezvous under a launcher.
    The ranks agree on a free port over the script's process group, which is then closed,
    so the re-run's ranks meet on their own."""
    env = dict(os.environ)
    import torch

    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return env
    import torch.distributed as d

    port = torch.tensor([_free_port() if d.get_rank() == 0 else 0], dtype=torch.int64)
    if "nccl" in str(d.get_backend()) and "cpu" not in str(d.get_backend()):
        port = port.cuda()
    d.broadcast(port, src=0)
    d.destroy_process_group()
    env["MASTER_PORT"] = str(int(port.item()))
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def rerun_meta(run_dir: Path) -> tuple[dict, Watch | None]:
    """For the re-run (``--into``): the watch run's meta to keep, and a Watch comparing
    each fast-forwarded step's loss with the watch series."""
    import json

    try:
        meta = json.loads((Path(run_dir) / META).read_text())
        series = series_store.read(run_dir)
    except (OSError, ValueError):
        return {}, None
    watch_meta = meta.get("watch") or {}
    check = None
    if series is not None:
        check = Watch(None, watch_meta.get("checks", ["nan"]), expect=series)
    return {"watch": watch_meta}, check
