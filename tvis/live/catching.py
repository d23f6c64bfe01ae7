"""`tvis.catch`: hand a value from the training loop to a live session, at the cost of a copy.

The call infers a name if none is given, counts calls per name for ``every``, takes a private host
copy of the value and queues it on the process's sender for the server address. It never raises
and never waits on the network; a problem becomes one line on stderr, once per name and kind of
problem.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from typing import Any

from tvis.live import codec
from tvis.live.address import parse_address, resolve
from tvis.live.naming import infer_name
from tvis.live.sender import Sender
from tvis.live.tensors import HostBuffers

FLUSH_SECONDS = 1.0
"""How long interpreter exit waits for catches still queued to a connected server: enough for the
last few steps' values over loopback, short enough that nobody notices the wait. An absent server
is not waited for at all."""

_lock = threading.Lock()
_buffers = HostBuffers()
_senders: dict[str, Sender] = {}
_counts: dict[str, int] = {}
_complaints: set[tuple[str, str]] = set()


def catch(obj: Any, name: str | None = None, every: int = 1, server: str | None = None) -> None:
    """Send ``obj`` to a live tvis session under ``name`` (inferred from the source if omitted).

    ``obj`` is a tensor (any device, dtype or strides), a numpy array, a number, a string, or a
    list/tuple/dict of those. With ``every=N`` only the 1st, (N+1)th, ... call per name sends.
    ``server`` is ``[TOKEN@]HOST:PORT``; the default is ``TVIS_SERVER``, else 127.0.0.1:2875.
    Returns at once; never raises.
    """
    try:
        if name is None:
            name = infer_name(sys._getframe(1))
        elif not isinstance(name, str):
            name = str(name)
        with _lock:
            seq = _counts[name] = _counts.get(name, 0) + 1
        if every > 1 and (seq - 1) % every:
            return
        key = resolve(server)
        sender = _senders.get(key) or _sender_for(key)
        snap, nbytes = codec.snapshot(obj, _buffers)
        sender.put(name, seq, snap, nbytes)
    except Exception as exc:
        _complain(name, exc)


def _sender_for(key: str) -> Sender:
    with _lock:
        if key not in _senders:
            if not _senders:
                atexit.register(_flush_all)
            _senders[key] = Sender(parse_address(key), _buffers)
        return _senders[key]


def _complain(name: Any, exc: Exception) -> None:
    try:
        what = (str(name), type(exc).__name__)
        if what not in _complaints:
            _complaints.add(what)
            sys.stderr.write(f"tvis.catch: could not catch {name!r}: {exc}\n")
    except Exception:
        pass  # A broken stderr is no reason to disturb training.


def _flush_all() -> None:
    deadline = time.monotonic() + FLUSH_SECONDS
    for sender in list(_senders.values()):
        sender.flush(max(0.0, deadline - time.monotonic()))


def _forget_senders() -> None:
    # A forked child (a DataLoader worker, say) inherits the senders but not their threads;
    # it starts its own on its first catch.
    global _lock, _buffers
    _lock = threading.Lock()
    _buffers = HostBuffers()
    _senders.clear()


os.register_at_fork(after_in_child=_forget_senders)
