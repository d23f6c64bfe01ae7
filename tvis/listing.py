"""`tvis ls`: the runs under a folder here, or at an ssh target (``HOST:PATH`` or a saved
target, asked through the same agent as ``tvis tui``), newest first."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from tvis.store import watch
from tvis.store.printable import human_bytes, printable_line
from tvis.store.reader import (
    RunReader,
    StoreError,
    find_runs,
    inside,
    leads_outside,
    remove_stale_temps,
)
from tvis.targets import add_ssh_options


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        nargs="?",
        default="tvis_runs",
        help="a runs folder or a project here, HOST:PATH, or a saved target name",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per run")
    add_ssh_options(parser)


def summarize(path: Path, root: Path | None = None) -> dict[str, Any]:
    """What `tvis ls` says of one run; a broken run is listed with its problem, and so is
    one that links outside ``root`` (as the agent lists it)."""
    outside = leads_outside(root, path) if root is not None else None
    if outside is not None:
        return {"run_id": path.name, "path": str(path), "status": "unreadable", "error": outside}
    try:
        run = RunReader(path)
        remove_stale_temps(run)
        index = run.index()
    except StoreError as e:
        return {"run_id": path.name, "path": str(path), "status": "unreadable", "error": str(e)}
    batches = index.get("batches", [])
    return {
        "run_id": run.run_id,
        "path": str(path),
        "script": run.meta.get("script"),
        "status": run.status,
        "started": run.meta.get("started"),
        "steps": len(index.get("steps", [])),
        "batches": len(batches),
        "calls": sum(b.get("n_calls", 0) for b in batches),
        "bytes": run.size_bytes(),
        "watch": watch.describe(run.meta),
    }


def _text(value: Any) -> str:
    return printable_line("" if value is None else str(value))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def main(args: argparse.Namespace) -> int:
    try:
        return _list(args)
    except BrokenPipeError:
        # `tvis ls | head`: the reader left; say nothing more, like ls does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _list(args: argparse.Namespace) -> int:
    root = Path(args.dir).expanduser()
    if root.exists() and not args.via:
        # Runs reached through a symlink out of the folder are left out, as the agent does.
        runs = [p for p in find_runs(root) if inside(root, p)]
        return _show([summarize(p, root) for p in runs], str(root), args.json)
    if args.dir == "tvis_runs" and not args.via:
        print(
            f"tvis: {root} does not exist; pass the folder that holds your runs.", file=sys.stderr
        )
        return 2
    return _remote(args)


def _remote(args: argparse.Namespace) -> int:
    """The runs at an ssh target, from its agent's ``runs`` method."""
    from tvis.agent.client import connect
    from tvis.agent.protocol import AgentError
    from tvis.targets import TargetError, resolve

    try:
        target = resolve(args.dir, via=args.via, remote_tvis=args.remote_tvis)
    except TargetError as e:
        print(f"tvis: {e}", file=sys.stderr)
        return 2
    try:
        with connect(target, allow_empty=True) as client:
            runs = client.call("runs")
            root = client.info.get("root", target.path)
    except AgentError as e:
        print(f"tvis: {e.message}", file=sys.stderr)
        return 1
    prefix = f"{target.host}:" if target.host else ""
    rows = [{**r, "path": f"{prefix}{root}/{r.get('run')}"} for r in runs]
    return _show(rows, target.describe(), args.json)


def _show(rows: list[dict[str, Any]], where: str, as_json: bool) -> int:
    if as_json:
        for row in rows:
            print(json.dumps(row, default=str))
        sys.stdout.flush()
        return 0
    if not rows:
        print(f"no runs under {where}")
        return 0
    print(f"{'run':44} {'status':11} {'steps':>5} {'batches':>7} {'calls':>7} {'size':>9}  script")
    for r in rows:
        # Every field came from a run's files or an agent: shown as text, never obeyed.
        counts = [_count(r.get(k)) for k in ("steps", "batches", "calls", "bytes")]
        print(
            f"{_text(r.get('run_id')):44} {_text(r.get('status')):11} {counts[0]:>5} "
            f"{counts[1]:>7} {counts[2]:>7} {human_bytes(counts[3]):>9}  {_text(r.get('script'))}"
        )
        if r.get("error"):
            print(f"    {_text(r['error'])}")
        if r.get("watch"):
            print(f"    {_text(r['watch'])}")
    sys.stdout.flush()  # inside the caller's BrokenPipeError guard, not at exit
    return 0
