"""The stdio server: request frames in on stdin, reply frames out on a private stdout fd.

Requests run on worker threads (``workers.Workers``) and replies go out as they finish,
under one write lock, so a slow view never holds back a cheap call and a stuck one never
starves the others; those a client sent ahead of need (``"background": true``) wait until
the others are answered. Bad input of any kind is answered with an error frame (or, when the
stream itself is unreadable, ends the session cleanly); the server never dies of it.
Memory is bounded: each request decodes into at most ``MAX_REQUEST_OBJECTS`` objects, and
requests waiting or running together cost at most ``MAX_QUEUED_COST`` bytes.

While a request is pending, a client that asked for it (``hello(heartbeat=True)``) gets a
heartbeat frame every ``HEARTBEAT_S``: silence then means the link is dead, not that the
agent is busy.
"""

from __future__ import annotations

import logging
import os
import threading
from functools import partial
from typing import Any

from tvis.agent.dispatch import background, handle, yields
from tvis.agent.protocol import (
    BAD_REQUEST,
    HEARTBEAT,
    HEARTBEAT_S,
    MAX_REQUEST_FRAME,
    MAX_REQUEST_OBJECTS,
    OBJECT_COST,
    FrameTooLarge,
    Readable,
    TooManyObjects,
    Truncated,
    decode_counted,
    read_frame,
    reply_frame,
    skip,
    widen_pipe,
)
from tvis.agent.workers import MOST, Workers

log = logging.getLogger("tvis.agent")

# Requests accepted but not yet answered; past this the server stops reading, so a client
# that floods it is slowed down instead of growing the agent's memory. (Each can have a
# thread of its own when others are stuck: workers.MOST.)
MAX_PENDING = MOST
# What requests waiting or running together may cost: frame bytes plus OBJECT_COST per
# decoded object. Cheap requests are a few hundred bytes each; 16 MiB still takes 64 of
# them at 256 KiB, and caps a flood of the largest (1 MiB frames, 64k objects each, ~5.5
# MB decoded) at three at a time.
MAX_QUEUED_COST = 16 << 20


class StdioServer:
    """Serves one client on a pair of byte streams until its input ends."""

    def __init__(self, api: Any, stdin: Readable, out_fd: int) -> None:
        self.api = api
        self.stdin = stdin
        self.out_fd = out_fd
        widen_pipe(out_fd)
        self._write_lock = threading.Lock()
        self._room = threading.Condition()
        self._pending = 0
        self._cost = 0
        self._beats = False
        self._stop = threading.Event()
        self._output_closed = False

    def serve(self) -> int:
        """Answer requests until stdin ends; returns the exit status (0)."""
        workers = Workers()
        threading.Thread(target=self._beat, name="tvis-agent-beat", daemon=True).start()
        try:
            while not self._output_closed:
                got = self._next_request()
                if got is _END:
                    break
                if got is _SKIPPED:
                    continue
                request, cost = got
                self._reserve(cost)
                if isinstance(request, dict) and request.get("method") == "hello":
                    params = request.get("params")
                    self._beats = isinstance(params, dict) and params.get("heartbeat") is True
                workers.submit(
                    partial(self._answer, request, cost), background(request), yields(request)
                )
        finally:
            workers.close()
            self._stop.set()
        return 0

    def _reserve(self, cost: int) -> None:
        """Wait until a request of ``cost`` fits the bounds; one always fits when none waits."""
        with self._room:
            while self._pending and (
                self._pending >= MAX_PENDING or self._cost + cost > MAX_QUEUED_COST
            ):
                self._room.wait()
            self._pending += 1
            self._cost += cost

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            if self._beats and self._pending > 0 and not self._output_closed:
                self.send(HEARTBEAT)

    def _next_request(self) -> Any:
        try:
            body = read_frame(self.stdin, MAX_REQUEST_FRAME)
        except FrameTooLarge as e:
            log.warning("%s; skipping it", e)
            self.send(
                {"id": None, "error": f"{e}; the request was skipped.", "status": BAD_REQUEST}
            )
            # Skipping the declared bytes keeps a real (if oversized) sender in step.
            return _SKIPPED if skip(self.stdin, e.size) else _END
        except Truncated as e:
            log.warning("%s; ending the session", e)
            return _END
        except OSError as e:
            log.warning("cannot read requests (%s); ending the session", e)
            return _END
        if body is None:
            return _END
        try:
            request, objects = decode_counted(body, arrays=False, max_objects=MAX_REQUEST_OBJECTS)
        except TooManyObjects:
            message = f"a request decodes into more than {MAX_REQUEST_OBJECTS} objects."
            self.send({"id": None, "error": message, "status": BAD_REQUEST})
            return _SKIPPED
        except Exception:
            self.send(
                {"id": None, "error": "a frame was not valid msgpack.", "status": BAD_REQUEST}
            )
            return _SKIPPED
        return request, len(body) + OBJECT_COST * objects

    def _answer(self, request: Any, cost: int) -> None:
        try:
            self.send(handle(self.api, request))
        except Exception:  # handle never raises; a job that did would stop its thread
            log.exception("a request failed outside its handler")
        finally:
            with self._room:
                self._pending -= 1
                self._cost -= cost
                self._room.notify_all()

    def send(self, reply: dict[str, Any]) -> None:
        """Write one reply frame (see ``reply_frame``; replies that cannot travel become
        error replies there)."""
        parts = reply_frame(reply)
        with self._write_lock:
            try:
                for part in parts:
                    data = memoryview(part)
                    while data:
                        data = data[os.write(self.out_fd, data) :]
            except OSError as e:
                if not self._output_closed:
                    log.warning("the client went away (%s)", e)
                self._output_closed = True


_END = object()
_SKIPPED = object()
