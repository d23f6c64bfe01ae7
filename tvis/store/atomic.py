"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgpack


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling and a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_msgpack(path: Path, obj: Any) -> None:
    write_bytes(path, msgpack.packb(obj, use_bin_type=True))


def write_json(path: Path, obj: Any) -> None:
    write_bytes(path, json.dumps(obj, indent=1, default=str).encode())
