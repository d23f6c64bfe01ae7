"""Live catching: `catch` values in a running job, `serve` and read them in another session.

Training side: `catch`. Session side: `serve`, `get`, `get_all`, `ingest_all`, `status`,
`summary`, `help`. Importing this package never imports torch, and each function loads only
its own side: the training loop's first `catch` pays for the sender, never for the server, the
session store or rich's printing.
"""

from __future__ import annotations

import importlib

_HOMES = {
    "catch": "tvis.live.catching",
    "serve": "tvis.live.session",
    "get": "tvis.live.session",
    "get_all": "tvis.live.session",
    "ingest_all": "tvis.live.session",
    "status": "tvis.live.report",
    "summary": "tvis.live.report",
    "help": "tvis.live.report",
}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tvis.live' has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(home), name)
    return value


__all__ = list(_HOMES)
