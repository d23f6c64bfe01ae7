"""Logs every cyclic collection of the processes it is put in front of, for the benches.

    TVIS_GC_LOG=DIR PYTHONPATH=bench/gc_log[:...] python bench/keys_bench.py RUN ...

Every Python process started with this folder on ``PYTHONPATH`` (the bench, the `tvis tui`
it drives, that viewer's agent) appends to ``DIR/PID.txt`` one line per collection that took
over 2 ms or was a full one: ``time.monotonic()`` at its end, its generation, its
milliseconds, the program and its first argument (``tvis tui``). The clock is the one
`bench/tui_bench.py` times keys with (``perf_counter`` and ``monotonic`` are both
CLOCK_MONOTONIC on Linux), so a key's window can be matched against it.
"""

import gc
import os
import sys
import time

_LOG_DIR = os.environ.get("TVIS_GC_LOG")
_started: list[float] = [0.0]


def _seen(phase: str, info: dict) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    ms = (time.perf_counter() - _started[0]) * 1000
    if ms > 2 or info["generation"] == 2:
        program = os.path.basename(sys.argv[0]) if sys.argv else "?"
        first = sys.argv[1] if len(sys.argv) > 1 else ""
        with open(os.path.join(str(_LOG_DIR), f"{os.getpid()}.txt"), "a") as log:
            log.write(f"{time.monotonic():.3f} {info['generation']} {ms:.1f} {program} {first}\n")


if _LOG_DIR:
    gc.callbacks.append(_seen)
