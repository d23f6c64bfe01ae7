"""Runs a training script in this process, as ``python script.py args`` would, recording it."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
import traceback
import types
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tvis.record import anomalies
from tvis.record.builder import Settings
from tvis.record.report import report
from tvis.store.format import COMPLETE, FAILED, INTERRUPTED
from tvis.store.writer import RunWriter


@dataclass(frozen=True)
class Outcome:
    """How the recorded script ended."""

    run_dir: Path
    status: str
    exit_code: int
    steps: int
    batches: int
    bytes: int
    notices: tuple
    contributors: tuple = ()  # (name, bytes) of the largest parts of the run
    anomalies: tuple = ()  # one sentence per anomaly (anomalies.summary)
    disk_full: str | None = None  # the write error that found the disk full
    signal: int | None = None  # SIGTERM/SIGHUP that ended it: the process dies of it next


def run_dir_for(out: Path, script: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return out / f"{stamp}_{script.stem}_{uuid.uuid4().hex[:6]}"


def process_meta(settings, project: Path) -> dict:
    """What a run's meta.json says of the process that recorded it."""
    import torch

    return {
        "cwd": os.getcwd(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "settings": settings.__dict__,
        "project": str(project),
    }


def record_script(
    script: Path,
    argv: list[str],
    settings: Settings,
    project: Path,
    out: Path,
    run_dir: Path | None = None,
    meta: dict | None = None,
    wide_project: bool = False,
    from_step: int = 0,
    check=None,
) -> Outcome:
    """Run ``script`` with ``argv`` as ``__main__`` under the recorder, into ``run_dir``
    (default: a new folder under ``out``); ``meta`` adds to the run's meta.json;
    ``wide_project``: see ``Project``. ``from_step``: run unobserved until that many
    optimizer steps are done (``check``, a Watch comparing each step with an earlier watch
    series, runs meanwhile)."""
    module = _main_module(script)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *argv]
    sys.path.insert(0, str(script.parent))
    try:
        return record(
            lambda: _run_main(script, module),
            settings,
            project,
            run_dir or run_dir_for(out, script),
            {"script": str(script), "argv": argv, **(meta or {})},
            module.__dict__,
            whole_script=True,
            wide_project=wide_project,
            from_step=from_step,
            check=check,
        )
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def record(
    fn: Callable[[], object],
    settings: Settings,
    project: Path,
    run_dir: Path,
    meta: dict | None = None,
    names: dict | None = None,
    whole_script: bool = False,
    wide_project: bool = False,
    from_step: int = 0,
    check=None,
) -> Outcome:
    """Call ``fn`` under the recorder, writing the run to ``run_dir``.

    ``names`` is a namespace whose variables name the models found (the script's
    globals); ``whole_script`` says that ``fn`` builds everything it trains (a script run
    from its start). Exceptions from ``fn`` are recorded, not raised.
    """

    from tvis.record.attention import AttentionCapture
    from tvis.record.data import DataPipeline
    from tvis.record.functions import FunctionTracer
    from tvis.record.grad_scaler import GradScaling
    from tvis.record.late import LateStart
    from tvis.record.loss import LossCapture
    from tvis.record.ops import LineOps
    from tvis.record.project import Project
    from tvis.record.rank_stop import StopAgreement
    from tvis.record.representations import Representations
    from tvis.record.session import Recorder, StopRecording
    from tvis.record.signals import SignalEnd, Terminated, ended_by
    from tvis.record.tokenizers import Tokenizers
    from tvis.record.transforms import Transforms
    from tvis.record.writer_thread import BackgroundWriter

    writer = RunWriter(
        run_dir,
        {"script": None, "argv": [], **process_meta(settings, project), **(meta or {})},
        mantissa_bits=settings.mantissa_bits,
    )
    background = BackgroundWriter(writer)
    recorder = Recorder(settings, background, Project(project, wide_project), names)
    recorder.whole_script = whole_script and not from_step
    recorder.first_step = recorder.step_index = from_step
    late = LateStart(recorder, from_step, check) if from_step else None
    rank = (meta or {}).get("rank")
    if isinstance(rank, dict) and rank.get("world_size", 1) > 1:
        recorder.rank_stop = StopAgreement(run_dir, rank["rank"], rank["world_size"])
    recorder.extensions += [
        DataPipeline(),
        LossCapture(),
        Representations(),
        Transforms(),
        Tokenizers(),
        GradScaling(),
    ]
    if settings.attention:
        recorder.extensions.append(AttentionCapture())
    if settings.functions:
        recorder.extensions.append(FunctionTracer())
    if settings.ops:
        recorder.extensions.append(LineOps())

    def hard_stop() -> None:
        # The script swallowed StopRecording: save, report and end the process here.
        if recorder.rank_stop is not None:
            recorder.rank_stop.ended()
        recorder.uninstall()
        if late is not None:
            late.uninstall()
        _finalize(recorder, background, writer, COMPLETE, 0, None)
        sys.stdout.flush()
        report(_outcome(run_dir, recorder, writer, COMPLETE, 0))
        sys.stderr.flush()
        os._exit(0)

    recorder.on_hard_stop = hard_stop
    status, exit_code, error = COMPLETE, 0, None
    ending = SignalEnd()
    held = None  # SIGINT's handler while the run is saved after a Ctrl-C
    try:
        if late is None:
            recorder.install()
        else:
            late.install()
        ending.install()
        fn()
    except StopRecording:
        pass
    except Terminated as e:
        status, exit_code, error = INTERRUPTED, 128 + e.signum, ended_by(e.signum)
    except SystemExit as e:
        exit_code = _exit_code(e.code)
        if exit_code != 0:
            status = FAILED
            error = f"the script exited with code {exit_code}"
    except KeyboardInterrupt:
        held = _hold_interrupts()
        if not recorder.stopped_origin:  # else: tvis stopped it, training ran on a thread
            status, exit_code, error = INTERRUPTED, 130, "interrupted (Ctrl-C)"
    except BaseException:
        status, exit_code = FAILED, 1
        error = _user_traceback()
        sys.stderr.write(error)
    finally:
        ending.finish()  # a signal from here on waits for the run to be written
        if recorder.rank_stop is not None:
            recorder.rank_stop.ended()  # no peer waits for this rank any more
        recorder.script_returned()
        if late is None or late.started:
            recorder.uninstall()
        if late is not None:
            late.uninstall()
    if late is not None and not late.started:
        recorder.notice(
            f"the script took {late.steps_seen} optimizer step(s), fewer than --from-step "
            f"{from_step}: nothing was recorded."
        )
    _finalize(recorder, background, writer, status, exit_code, error)
    if held is not None:
        signal.signal(signal.SIGINT, held)
    ending.restore()
    return replace(_outcome(run_dir, recorder, writer, status, exit_code), signal=ending.received)


def _outcome(run_dir: Path, recorder, writer: RunWriter, status: str, exit_code: int) -> Outcome:
    lost_batches, lost_steps = recorder.writer.lost_batches, recorder.writer.lost_steps
    return Outcome(
        run_dir=run_dir,
        status=status,
        exit_code=exit_code,
        steps=recorder.step_index - recorder.first_step - len(lost_steps),
        batches=sum(
            1 for b in recorder.batch_maps if not b["light"] and b["index"] not in lost_batches
        ),
        bytes=writer.bytes_written,
        notices=tuple(n["text"] for n in recorder.notices),
        contributors=tuple(_contributors(recorder).most_common(3)),
        anomalies=tuple(a["text"] for a in recorder.anomalies),
        disk_full=recorder.writer.disk_full,
    )


def _contributors(recorder):
    """Stored bytes by source: batch values by call, parameter values as encoded."""
    parts = recorder.contributors.copy()
    if recorder.writer.param_bytes:
        parts["parameters (weight, grad, Δw)"] = recorder.writer.param_bytes
    return parts


def _main_module(script: Path) -> types.ModuleType:
    """A fresh ``__main__`` module for the script (its globals also name the models)."""
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=str(script), __builtins__=__builtins__, __cached__=None)
    return module


def _run_main(script: Path, module: types.ModuleType) -> None:
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(compile(script.read_bytes(), str(script), "exec"), module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _finalize(recorder, background, writer, status, exit_code, error) -> None:
    """Write what is left, as far as the disk allows: never raises for a disk error."""
    try:
        recorder.finish()
    except Exception as e:
        recorder.notice(f"tvis could not close the last batch: {e}")
        recorder.write_index()
    background.close()
    for problem in background.errors:
        recorder.notice(f"tvis could not write part of the run: {problem}")
    recorder.anomalies = anomalies.summary(
        recorder.loss_bad, background.origins, background.grad_norms, _never_graded(recorder)
    )
    if background.disk_full:
        recorder.notice(disk_full_sentence(writer.path, background), level="error")
    writer.release_reserve()
    final = (
        lambda: writer.write_index(background.without_lost(recorder.index())),
        lambda: writer.write_meta(
            status=status, exit_code=exit_code, error=error, ended=time.time()
        ),
        lambda: writer.write_sources(recorder.project.sources),
    )
    for write in final:
        try:
            write()
        except OSError as e:
            background.disk_full = background.disk_full or f"{e.strerror} ({e.filename})"


def disk_full_sentence(path: Path, background) -> str:
    """What a full disk cost the run, as it happened: what was kept, what could not be
    written (the run index leaves those out), what fit later with statistics only."""
    lost = len(background.lost_batches) + len(background.lost_steps)
    later = background.written_after_full
    fitted = f"; {later} later one(s) fit with statistics only" if later else ""
    return (
        f"disk full at {path}: kept {background.batches_written} batch(es) and "
        f"{background.steps_written} step(s); {lost} batch(es) and step(s) could not be "
        f"written and are not in the run{fitted}. Free space and record again to keep more; "
        "training was not affected."
    )


def _never_graded(recorder) -> set[str]:
    """Parameters an optimizer stepped without a gradient at every recorded step."""
    steps = [s.get("no_grad") or [] for s in recorder.step_maps if s.get("optimizers")]
    if not steps:
        return set()
    return set(steps[0]).intersection(*steps[1:])


def _hold_interrupts():
    """After a Ctrl-C, ignore the next ones until the run is saved (well under a second): a
    second press is impatience, and a KeyboardInterrupt in the middle of saving would leave
    hooks installed and a traceback. Returns the handler to put back (None: none was set)."""
    if threading.current_thread() is not threading.main_thread():
        return None  # only the main thread may set handlers (an in-process recording)
    return signal.signal(signal.SIGINT, signal.SIG_IGN)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def _user_traceback() -> str:
    """The traceback as Python would print it, without tvis's own frames on top."""
    etype, value, tb = sys.exc_info()
    frames = traceback.extract_tb(tb)
    skip = 0
    for i, frame in enumerate(frames):
        if "tvis" + os.sep + "record" in frame.filename:
            skip = i + 1
        else:
            break
    lines = ["Traceback (most recent call last):\n"]
    lines += traceback.format_list(frames[skip:])
    lines += traceback.format_exception_only(etype, value)
    return "".join(lines)
