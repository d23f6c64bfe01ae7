"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgpack

from tvis.store.format import TMP_SUFFIX


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling and a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_msgpack(path: Path, obj: Any) -> None:
    write_bytes(path, msgpack.packb(obj, use_bin_type=True))


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, default=str).encode()


def write_json(path: Path, obj: Any) -> None:
    write_bytes(path, json_bytes(obj))
