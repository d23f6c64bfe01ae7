"""The stdio server: request frames in on stdin, reply frames out on a private stdout fd.

Requests run in a thread pool and replies go out as they finish, under one write lock,
so a slow view never holds back a cheap call. Bad input of any kind is answered with an
error frame (or, when the stream itself is unreadable, ends the session cleanly); the
server never dies of it and never holds more than its bounded frames in memory.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

from tvis.agent.dispatch import handle
from tvis.agent.protocol import (
    BAD_REQUEST,
    MAX_REQUEST_FRAME,
    FrameTooLarge,
    Truncated,
    decode,
    read_frame,
    reply_frame,
    skip,
    widen_pipe,
)

log = logging.getLogger("tvis.agent")

# Enough workers that several slow views and a burst of cheap calls overlap; numpy
# releases the GIL in the heavy parts, and more threads would only contend for memory.
WORKERS = 8
# Requests accepted but not yet answered; past this the server stops reading, so a client
# that floods it is slowed down instead of growing the agent's memory.
MAX_PENDING = 64


class StdioServer:
    """Serves one client on a pair of byte streams until its input ends."""

    def __init__(self, api: Any, stdin: BinaryIO, out_fd: int) -> None:
        self.api = api
        self.stdin = stdin
        self.out_fd = out_fd
        widen_pipe(out_fd)
        self._write_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_PENDING)
        self._output_closed = False

    def serve(self) -> int:
        """Answer requests until stdin ends; returns the exit status (0)."""
        with ThreadPoolExecutor(WORKERS, thread_name_prefix="tvis-agent") as pool:
            while not self._output_closed:
                request = self._next_request()
                if request is _END:
                    break
                if request is _SKIPPED:
                    continue
                self._slots.acquire()
                pool.submit(self._answer, request)
        return 0

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
            return decode(body, arrays=False)
        except Exception:
            self.send(
                {"id": None, "error": "a frame was not valid msgpack.", "status": BAD_REQUEST}
            )
            return _SKIPPED

    def _answer(self, request: Any) -> None:
        try:
            self.send(handle(self.api, request))
        finally:
            self._slots.release()

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
