"""The interactive side: `serve()` in a REPL or notebook, then read what arrives.

One server per session, started by `serve()` and shared by every function here. Values come back
as torch tensors when torch is installed (bfloat16 included), else as numpy arrays (bfloat16 as
float32, which holds every bfloat16 value exactly); caught numpy arrays stay numpy arrays.
"""

from __future__ import annotations

import keyword
import sys
from typing import Any

from tvis.live import tensors
from tvis.live.address import parse_address, resolve
from tvis.live.codec import Array
from tvis.live.server import LiveServer
from tvis.live.store import HISTORY, MAX_BYTES, MAX_TOTAL, Entry

_server: LiveServer | None = None
_requested: tuple[str, int] | None = None


def serve(
    port: int | None = None,
    host: str | None = None,
    token: str | None = None,
    history: int = HISTORY,
    max_bytes: int = MAX_BYTES,
    max_total: int = MAX_TOTAL,
) -> None:
    """Start receiving catches in the background.

    Where: the arguments given, else ``TVIS_SERVER`` (``[TOKEN@]HOST[:PORT]``, the address
    senders use), else 127.0.0.1:2875. Calling again for the same place is harmless; for
    another place the server moves there (the values caught so far stay readable).
    ``history`` and ``max_bytes`` bound what is kept per name, ``max_total`` what is kept in
    all (the oldest entries go first). Binding anything but loopback
    needs ``token``; senders then use ``server="TOKEN@HOST:PORT"`` or ``TVIS_SERVER``.
    """
    global _server, _requested
    configured = parse_address(resolve(None))
    host = configured.host if host is None else host
    port = configured.port if port is None else port
    token = configured.token if token is None else token
    if _server is not None and (host, port) == _requested:
        return
    server = LiveServer(host, port, token, history, max_bytes, max_total=max_total)
    kept = _server.store if _server is not None else None
    if kept is not None and (kept.history, kept.max_bytes, kept.max_total) == (
        history,
        max_bytes,
        max_total,
    ):
        server.store = kept  # moving keeps what was caught
    server.start()  # before the old one stops: a port that is taken leaves it serving
    old, _server, _requested = _server, server, (host, port)
    if old is not None:
        old.stop()
        print(f"tvis: moved from {old.address} to {server.address}", file=sys.stderr)
    else:
        print(f"tvis: receiving catches on {server.address}", file=sys.stderr)


def server() -> LiveServer:
    """The session's running server; a one-sentence error if `serve()` was not called."""
    if _server is None:
        raise RuntimeError("Nothing is being received yet; call tvis.serve() first.")
    return _server


def get(name: str, index: int = -1, rank: int | None = None) -> Any:
    """The value caught under ``name``: the newest by default, older ones by negative index;
    ``rank``: only what that rank of a distributed job sent.

    A tensor shares memory with the kept history; clone it before changing it in place.
    """
    entries = _entries(name, rank)
    try:
        entry = entries[index]
    except IndexError:
        raise IndexError(
            f"{name!r} has {len(entries)} kept values; use an index from {-len(entries)} to "
            f"{len(entries) - 1}."
        ) from None
    return to_session(entry.value)


def get_all(name: str, rank: int | None = None) -> list[Any]:
    """Every kept value caught under ``name``, oldest first; ``rank``: only that rank's."""
    return [to_session(e.value) for e in _entries(name, rank)]


def ingest_all() -> list[str]:
    """Bind the newest value of every name in the caller's global namespace; return the names.

    Names that are not identifiers (given explicitly to catch) are skipped.
    """
    namespace = sys._getframe(1).f_globals
    store = server().store
    bound = []
    for name in store.names():
        latest = store.latest(name)  # None: forgotten since names() was read
        if latest is not None and name.isidentifier() and not keyword.iskeyword(name):
            namespace[name] = to_session(latest.value)
            bound.append(name)
    return bound


def to_session(value: Any) -> Any:
    """A received value as the session sees it: torch tensors, numpy arrays, plain Python."""
    if isinstance(value, Array):
        if value.kind == "tensor" and tensors.torch_available():
            return tensors.to_torch(value.data, value.dtype)
        return value.numeric()
    if isinstance(value, list):
        return [to_session(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_session(v) for v in value)
    if isinstance(value, dict):
        return {k: to_session(v) for k, v in value.items()}
    return value


def _entries(name: str, rank: int | None = None) -> list[Entry]:
    entries = server().store.entries(name)
    if not entries:
        raise KeyError(f"Nothing named {name!r} has arrived; tvis.summary() lists what has.")
    if rank is None:
        return entries
    mine = [e for e in entries if e.sender.get("rank") == rank]
    if not mine:
        seen = sorted({e.sender.get("rank") for e in entries} - {None})
        raise KeyError(
            f"Nothing named {name!r} has arrived from rank {rank}; "
            f"it came from {'ranks ' + ', '.join(map(str, seen)) if seen else 'no ranked sender'}."
        )
    return mine
