"""tvis: a step-through debugger for PyTorch training that lives in the terminal.

Importing tvis is cheap and never imports torch: the live-catching functions and
``connect`` (the Python API over recorded runs, tvis.runs) load their machinery
on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"

_LIVE_API = ("catch", "serve", "get", "get_all", "ingest_all", "status", "summary", "help")


def __getattr__(name: str):
    # Lazy so that `import tvis` (done by the viewer and the agent) stays torch-free and fast.
    if name in _LIVE_API:
        from tvis import live

        value = globals()[name] = getattr(live, name)  # later lookups skip this hook
        return value
    if name == "connect":
        from tvis.runs import connect

        globals()[name] = connect
        return connect
    raise AttributeError(f"module 'tvis' has no attribute {name!r}")


__all__ = ["__version__", "connect", *_LIVE_API]
