"""Time each optimizer step of a script, plainly or under the recorder, from inside.

A global optimizer step hook (registered before tvis's own) notes the time of every
step; the median interval between steps is the per-step cost, immune to process start-up
and robust to the odd slow step on a shared machine. Both arms stop after --steps steps.

    python bench/step_times.py [--record [--without ops ...] [--project-root DIR]] --steps 12 SCRIPT [ARGS...]

``--project-root DIR`` records as `tvis run` does by default: DIR (the script's work tree)
plus every imported file outside installed packages; without it, the script's folder only.
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import sys
import tempfile
import time
from pathlib import Path


class _Enough(BaseException):
    """Ends the plain arm after the wanted steps, as tvis ends the recorded one."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument(
        "--without", nargs="*", default=[], help="functions, ops, gradcam, attention"
    )
    parser.add_argument("--project-root", type=Path, help="wide project from this root")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()

    from torch.optim.optimizer import register_optimizer_step_post_hook

    stamps: list[float] = []
    cpu: list[float] = []

    def note(optimizer, args, kwargs) -> None:
        stamps.append(time.perf_counter())
        cpu.append(time.process_time())
        if not opts.record and len(stamps) >= opts.steps:
            raise _Enough()

    register_optimizer_step_post_hook(note)
    script = Path(opts.script).resolve()
    size = 0
    if opts.record:
        from tvis.record.builder import Settings
        from tvis.record.runner import record_script

        off = {name: False for name in opts.without}
        settings = Settings(steps=opts.steps, **off)
        # Removed after: runs left behind fill the page cache, and on a VM whose free
        # memory is reclaimed by the host, writing into fresh pages slows the next runs.
        with tempfile.TemporaryDirectory(prefix="tvis-step-times-") as out:
            root = opts.project_root or script.parent
            wide = opts.project_root is not None
            outcome = record_script(script, opts.args, settings, root, Path(out), wide_project=wide)
        size = outcome.bytes
    else:
        sys.argv = [str(script), *opts.args]
        sys.path.insert(0, str(script.parent))
        try:
            runpy.run_path(str(script), run_name="__main__")
        except _Enough:
            pass
    print(
        json.dumps(
            {
                "median_ms": _median_interval(stamps),
                "cpu_ms": _median_interval(cpu),
                "bytes": size,
                "steps": len(stamps),
            }
        )
    )


def _median_interval(times: list[float]) -> float:
    """Median milliseconds between steps, the first (warm-up) interval skipped."""
    return statistics.median(b - a for a, b in zip(times[1:-1], times[2:], strict=True)) * 1e3


if __name__ == "__main__":
    main()
