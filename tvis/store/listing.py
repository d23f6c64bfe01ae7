"""`tvis ls`: the runs under a directory, newest first."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tvis.store.reader import RunReader, StoreError, find_runs, remove_stale_temps


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", nargs="?", default="tvis_runs", help="a runs folder or a project")
    parser.add_argument("--json", action="store_true", help="one JSON object per run")


def summarize(path: Path) -> dict[str, Any]:
    """What `tvis ls` says of one run; a broken run is listed with its problem."""
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
    }


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def main(args: argparse.Namespace) -> int:
    root = Path(args.dir).expanduser()
    if not root.exists():
        print(
            f"tvis: {root} does not exist; pass the folder that holds your runs.", file=sys.stderr
        )
        return 2
    rows = [summarize(p) for p in find_runs(root)]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    if not rows:
        print(f"no runs under {root}")
        return 0
    print(f"{'run':44} {'status':11} {'steps':>5} {'batches':>7} {'calls':>7} {'size':>9}  script")
    for r in rows:
        print(
            f"{r['run_id']:44} {r['status']:11} {r.get('steps', 0):>5} {r.get('batches', 0):>7} "
            f"{r.get('calls', 0):>7} {human_bytes(r.get('bytes', 0)):>9}  {r.get('script') or ''}"
        )
        if r.get("error"):
            print(f"    {r['error']}")
    return 0
