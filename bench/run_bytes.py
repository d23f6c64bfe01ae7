"""Where a run's bytes go: each batch's values by kind, each step's by parameter part.

    .venv/bin/python bench/run_bytes.py <run folder>

A batch's entries are grouped by what they are — an activation or a gradient, named by
the class of the module that returned the tensor (``fn`` for a function, ``(in)`` for a
tensor no recorded call returned: one made by an op such as a residual add), arrays tvis
derived, and values stored as recipes (no bytes) — with their bytes in the blob, their raw
bytes and the ratio. A step's are summed per part (weight, grad, update). Sizes in MB
(10^6 bytes), as ``tvis run`` prints them. The figures of bench/README.md's size sections come
from it.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import numpy as np

from tvis.store.reader import RunReader


def _raw(value: dict) -> int:
    return int(np.prod(value["shape"], dtype=np.int64)) * np.dtype(value["dtype"]).itemsize


def _producers(record: dict) -> dict[int, list[tuple[str, str | None]]]:
    """tensor id -> (side, module class) of every call that took or returned it."""
    roles: dict[int, list[tuple[str, str | None]]] = {}
    for call in record.get("calls") or []:
        for side in ("inputs", "outputs"):
            for arg in call.get(side) or []:
                if isinstance(arg, dict) and isinstance(arg.get("tensor"), int):
                    roles.setdefault(arg["tensor"], []).append((side, call.get("cls")))
    return roles


def batch_table(chunk) -> list[tuple[str, int, int, int]]:
    """(kind, entries, bytes stored, raw bytes) of one batch, largest first."""
    record = chunk.record
    roles = _producers(record)
    tensors = record["tensors"]
    stored: collections.Counter = collections.Counter()
    raw: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    for i in range(len(tensors)):
        entry = tensors[i]
        value = entry.get("value")
        if not value:
            continue
        if entry.get("derived"):
            kind = "derived by tvis"
        else:
            of = entry.get("of")
            seen = roles.get(of if isinstance(of, int) else entry["id"], [])
            made = [cls for side, cls in seen if side == "outputs"]
            cls = (made[0] if made else (seen[0][1] if seen else "?")) or "fn"
            kind = f"{'gradient' if isinstance(of, int) else 'activation'}: {cls}"
            kind += "" if made else " (in)"
        if "derive" in value:
            kind += f" [recipe {value['derive']['op']}]"
        count[kind] += 1
        stored[kind] += 0 if "derive" in value else int(value.get("nbytes", 0))
        raw[kind] += _raw(value)
    return sorted(
        ((k, count[k], stored[k], raw[k]) for k in count), key=lambda row: (-row[2], -row[3])
    )


def step_table(chunk) -> dict[str, tuple[int, int]]:
    """part -> (bytes stored, raw bytes) of one step."""
    record = chunk.record
    out: dict[str, list[int]] = {}
    for param in record.get("params") or []:
        for part in ("weight", "grad", "update"):
            tensor = param.get(part)
            value = chunk.tensor(tensor).get("value") if isinstance(tensor, int) else None
            if value:
                row = out.setdefault(part, [0, 0])
                row[0] += int(value["nbytes"])
                row[1] += _raw(value)
    return {part: (row[0], row[1]) for part, row in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    args = parser.parse_args()
    run = RunReader(args.run)
    mb = 1e6
    for b in run.batch_ids():
        chunk = run.batch(b)
        blob = (chunk.path / "blob.bin").stat().st_size
        print(f"\nbatch {b}: blob {blob / mb:.2f} MB")
        print("| kind | entries | stored MB | raw MB | ratio |\n|---|---|---|---|---|")
        for kind, n, stored, raw in batch_table(chunk):
            print(f"| {kind} | {n} | {stored / mb:.2f} | {raw / mb:.2f} | {stored / raw:.3f} |")
    for s in run.step_ids():
        chunk = run.step(s)
        blob = (chunk.path / "blob.bin").stat().st_size
        parts = ", ".join(
            f"{part} {stored / mb:.2f} of {raw / mb:.2f}"
            for part, (stored, raw) in step_table(chunk).items()
        )
        print(f"\nstep {s}: blob {blob / mb:.2f} MB ({parts} MB raw)")


if __name__ == "__main__":
    main()
