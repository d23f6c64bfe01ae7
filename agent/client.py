"""Clients of the agent: the same ``call(method, **params)`` in-process or over ssh.

``connect(target)`` returns a ``LocalClient`` for a folder on this machine (the API in
this process) or an ``SshClient`` (``ssh host tvis agent --stdio``); the viewer uses
``open_client(target, own_process=True)``, which gives a ``LocalProcessClient`` (``tvis
agent --stdio`` in a process of its own) for a folder. Those two are ``PipeClient``s, which talk to an agent subprocess with replies matched to requests by
id. All are thread-safe and return the same Python types; errors raise ``AgentError`` and
a lost connection ``ConnectionLost``, each with one sentence.
"""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tvis import __version__
from tvis.agent import ssh
from tvis.agent.protocol import (
    AGENT_FAULT,
    BAD_REQUEST,
    DATA_FLAG,
    DATA_ID,
    HEARTBEAT,
    MAX_READ,
    MAX_REPLY_FRAME,
    MAX_REPLY_OBJECTS,
    MAX_REQUEST_FRAME,
    NOT_FOUND,
    PROTOCOL_VERSION,
    VERSION_MISMATCH,
    AgentError,
    ConnectionLost,
    FrameTooLarge,
    RawBytes,
    TooManyObjects,
    Truncated,
    decode,
    encode,
    frame,
    mismatch_message,
    read_body,
    read_exact,
    read_into,
    read_length,
    reply_body,
    result_of,
    skip,
    widen_pipe,
)
from tvis.agent.target import Target

if TYPE_CHECKING:
    import numpy as np

    from tvis.agent.api import AgentAPI

# numpy and the agent's API are imported where they are used: `tvis tui` starts its agent
# process through this module before anything else, and the viewer never needs the API.

__all__ = [
    "AgentError",
    "Client",
    "ConnectionLost",
    "LocalClient",
    "PipeClient",
    "SshClient",
    "connect",
]

log = logging.getLogger("tvis.agent.client")

# How much of ssh's stderr is kept to explain a failure: the last few lines are enough.
STDERR_TAIL = 4096
# After stdout ends, how long to wait for ssh to exit and say why.
EXIT_GRACE_S = 5.0
# ``read_values`` asks for a tensor in chunks of this size, READ_WINDOW of them in flight:
# while one chunk crosses the link the agent is already writing the next, so the ssh pipe
# never runs dry waiting for a request, and at most 32 MiB are on their way at once.
HEARTBEAT_FRAME = encode(HEARTBEAT)
READ_CHUNK = 8 << 20
READ_WINDOW = 4
# An agent that beats (see protocol.HEARTBEAT_S, twice a second) and has said nothing for
# this long while a request waits is behind a dead link (ssh stopped, network gone): every
# waiting call fails at once instead of hanging. Twenty missed beats, so a loaded machine
# is never taken for a dead one.
LINK_SILENCE_S = 10.0
# A request whose answer has not begun for this long, with no other reply arriving
# meanwhile, fails with a sentence naming the host and the method (the link may be alive,
# beating, while the agent is stuck); the agent's longest builds take seconds.
ANSWER_TIMEOUT_S = 120.0
OUTPUT_ENDED = "its output ended"
# How often the watchdog looks at the waiting requests.
WATCH_S = 0.25

Progress = Callable[[int, int], None]
"""Called with (bytes received, bytes in all) as a transfer advances."""


class Client(ABC):
    """What the viewer talks to. ``info`` is the agent's ``hello`` reply. ``on_lost``, when
    set, is called (from a client thread) with the sentence once the connection drops, so a
    viewer can say so before it asks for anything more."""

    info: dict[str, Any]
    on_lost: Callable[[str], None] | None = None
    read_size = READ_CHUNK  # bytes per ``read`` request in ``read_values``
    # Whether ``read_values`` touches each chunk's pages before asking for it (see _touch).
    prefault = False

    @abstractmethod
    def call(self, method: str, **params: Any) -> Any:
        """Run ``method`` on the agent and return its result (blocking, thread-safe)."""

    def call_background(self, method: str, **params: Any) -> Any:
        """``call`` for what is fetched ahead of need: the agent serves it once nothing else
        it was asked waits (a request-map key, ``background``; agent/workers.py). A client
        without a queue of its own (in process) just calls."""
        return self.call(method, **params)

    @abstractmethod
    def describe(self) -> str:
        """Where the runs are, for a status line."""

    @abstractmethod
    def close(self) -> None:
        """End the session; later calls raise ``ConnectionLost`` where there is one."""

    @abstractmethod
    def read_chunk(self, into: memoryview, **params: Any) -> Future[Any]:
        """Start a ``read`` whose bytes land in ``into``; the future holds the reply map."""

    def read_values(
        self, into: memoryview, progress: Progress | None = None, **params: Any
    ) -> None:
        """Fill ``into`` with a tensor's stored bytes (``params`` name it as for ``read``),
        several chunks in flight, each written where it belongs without another copy.

        Raises the agent's ``AgentError`` (one sentence); ``into`` is then incomplete."""
        total, done, error = len(into), 0, None
        starts = iter(range(0, total, self.read_size))
        flight: deque[Future[Any]] = deque()

        def send_next() -> None:
            start = next(starts, None)
            if start is not None and error is None:
                end = min(start + self.read_size, total)
                if self.prefault:
                    _touch(into[start:end])
                flight.append(
                    self.read_chunk(into[start:end], offset=start, length=end - start, **params)
                )

        for _ in range(READ_WINDOW):
            send_next()
        while flight:
            try:
                done += result_of(flight.popleft().result())
            except AgentError as e:
                error = error or e
            if progress is not None and error is None:
                progress(done, total)
            send_next()
        if error is not None:
            raise _older_agent(error) from None

    def send_ahead(self, method: str, **params: Any) -> Future[Any]:
        """Put a request on the wire and return before it is answered: the future holds its
        reply map (``result_of`` reads it), so the next request can follow at once. In
        process it is answered before this returns."""
        future: Future[Any] = Future()
        try:
            future.set_result({"result": self.call(method, **params)})
        except AgentError as e:
            future.set_result({"error": e.message, "status": e.status})
        return future

    def handshake(self) -> dict[str, Any]:
        """Exchange versions; a mismatch raises one sentence naming both."""
        return self.greeted(self.say_hello())

    def say_hello(self) -> Future[Any]:
        """The handshake's request, sent (``send_ahead``); ``greeted`` reads its answer."""
        return self.send_ahead(
            "hello", protocol=PROTOCOL_VERSION, version=__version__, heartbeat=True
        )

    def greeted(self, hello: Future[Any]) -> dict[str, Any]:
        """The agent's answer to ``say_hello``, its versions checked: a mismatch raises one
        sentence naming both."""
        info = result_of(hello.result())
        if not isinstance(info, dict) or info.get("protocol") != PROTOCOL_VERSION:
            theirs = info if isinstance(info, dict) else {}
            raise AgentError(
                mismatch_message(
                    __version__,
                    PROTOCOL_VERSION,
                    str(theirs.get("host", "the agent")),
                    str(theirs.get("version", "?")),
                    theirs.get("protocol", -1),
                ),
                VERSION_MISMATCH,
            )
        self.info = info
        return info

    def silence(self) -> float:
        """Seconds the agent has said nothing while a request waits (0 when none waits)."""
        return 0.0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalClient(Client):
    """The API in this process. Replies take a trip through the wire encoding, so a page
    sees exactly the types an ssh client would give it."""

    read_size = MAX_READ  # nothing to overlap in-process: fewer, larger copies

    def __init__(self, root: Path | str) -> None:
        if not Path(root).is_dir():
            raise AgentError(f"{root} is not a folder.", NOT_FOUND)
        from tvis.agent.api import AgentAPI
        from tvis.agent.dispatch import handle

        self.root = str(root)
        self.api: AgentAPI = AgentAPI(root)
        self._handle = handle

    def call(self, method: str, **params: Any) -> Any:
        reply = self._handle(self.api, {"id": 0, "method": method, "params": params})
        return result_of(decode(reply_body(reply), clean=True))

    def read_chunk(self, into: memoryview, **params: Any) -> Future[Any]:
        # One copy, from the memory-mapped blob into the caller's buffer: memory speed.
        reply = self._handle(self.api, {"id": 0, "method": "read", "params": params})
        result = reply.get("result")
        if isinstance(result, RawBytes):
            reply = _fill(into, result.data, reply["id"])
        future: Future[Any] = Future()
        future.set_result(reply)
        return future

    def describe(self) -> str:
        return f"local {self.root}"

    def close(self) -> None:
        """Nothing to release: the API holds only caches."""


class PipeClient(Client):
    """An agent in a subprocess, spoken to over its stdin/stdout. Requests are written
    under a lock; a reader thread hands each reply to the caller waiting on its id."""

    prefault = True

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str,
        echo_stderr: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.name = name
        self._echo = echo_stderr
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[Any]] = {}
        self._methods: dict[int, str] = {}  # what each pending request asked, for sentences
        self._sinks: dict[int, memoryview] = {}  # where a read's data frame is written
        # When the agent last said anything (heartbeats included), and when a reply last
        # made progress; both restart when a request is sent to an agent with none pending.
        self._heard = self._progress = time.monotonic()
        self._mid_reply = False  # whether the bytes being read belong to a reply
        self._beating = False  # whether the agent beats while requests are pending
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._lost: str | None = None
        self._closed = False
        self._answered = False
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        log.debug("starting %s", self.argv)
        try:
            self._proc = subprocess.Popen(
                self.argv,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
            )
        except OSError as e:
            raise ConnectionLost(f"cannot run {self.argv[0]} ({e.strerror}).") from None
        stdin, stdout, stderr = self._proc.stdin, self._proc.stdout, self._proc.stderr
        assert stdin is not None and stdout is not None and stderr is not None  # all pipes
        self._stdin, self._stdout, self._stderr = stdin, stdout, stderr
        widen_pipe(stdout.fileno())
        self._stderr_thread = threading.Thread(target=self._pump_stderr, daemon=True)
        self._stderr_thread.start()
        threading.Thread(target=self._read_replies, daemon=True).start()
        threading.Thread(target=self._watch, daemon=True).start()

    @property
    def pid(self) -> int:
        """The process id of the subprocess (ssh, for an ssh client)."""
        return self._proc.pid

    def describe(self) -> str:
        return self.name

    def greeted(self, hello: Future[Any]) -> dict[str, Any]:
        info = super().greeted(hello)
        self._beating = isinstance(info.get("heartbeat"), (int, float))
        return info

    def silence(self) -> float:
        with self._lock:
            return time.monotonic() - self._heard if self._pending else 0.0

    def call(self, method: str, **params: Any) -> Any:
        return result_of(self._send(method, params, None).result())

    def call_background(self, method: str, **params: Any) -> Any:
        return result_of(self._send(method, params, None, background=True).result())

    def read_chunk(self, into: memoryview, **params: Any) -> Future[Any]:
        return self._send("read", params, into)

    def send_ahead(self, method: str, **params: Any) -> Future[Any]:
        return self._send(method, params, None)

    def _send(
        self,
        method: str,
        params: dict[str, Any],
        sink: memoryview | None,
        background: bool = False,
    ) -> Future[Any]:
        """Send a request; the future gets its reply map (or ``ConnectionLost``)."""
        future: Future[Any] = Future()
        with self._lock:
            if self._lost is not None:
                raise ConnectionLost(self._lost)
            rid = next(self._ids)
            if not self._pending:
                self._heard = self._progress = time.monotonic()
            self._pending[rid] = future
            self._methods[rid] = method
            if sink is not None:
                self._sinks[rid] = sink
        request = {"id": rid, "method": method, "params": params}
        if background:
            request["background"] = True
        body = encode(request)
        if len(body) > MAX_REQUEST_FRAME:
            with self._lock:
                self._pending.pop(rid, None)
                self._methods.pop(rid, None)
                self._sinks.pop(rid, None)
            raise AgentError(f"the {method} request is too large to send.", BAD_REQUEST)
        try:
            with self._write_lock:
                self._stdin.write(frame(body))
        except (OSError, ValueError):
            pass  # the reader sees the end of the stream and fails every waiting call
        return future

    def close(self) -> None:
        """End the session: the agent exits when its stdin closes."""
        with self._lock:
            self._closed = True
            if self._lost is None:
                self._lost = f"the connection to {self.name} was closed."
        try:
            self._stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def explain_exit(self, code: int | None, stderr: str, reason: str) -> str:
        """One sentence for a subprocess that ended before the agent ever answered."""
        last = stderr.strip().splitlines()[-1] if stderr.strip() else reason
        return f"the agent ({self.name}) stopped with exit status {code} ({last})."

    def explain_drop(self, code: int | None, reason: str) -> str:
        """One sentence for a connection that ended after the agent had answered."""
        status = f"exit status {code}" if code is not None else reason
        if code is not None and reason != OUTPUT_ENDED:
            status = f"{reason}; {status}"  # the client ended it: say why
        return f"the connection to {self.name} dropped ({status}); reconnect to continue."

    # -- threads -------------------------------------------------------------------------

    def _pump_stderr(self) -> None:
        # The subprocess's messages (ssh's, the remote agent's) still reach the user, as if
        # stderr were inherited; the tail is kept to explain a failure in one sentence.
        fd = self._stderr.fileno()
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._tail.append(data)
                self._tail_size += len(data)
                while self._tail_size - len(self._tail[0]) >= STDERR_TAIL:
                    self._tail_size -= len(self._tail.popleft())
            if self._echo:
                sys.stderr.write(data.decode("utf-8", "replace"))
                sys.stderr.flush()

    def _read_replies(self) -> None:
        stream = _Watched(self._stdout, self._heard_now)
        reason = OUTPUT_ENDED
        while True:
            try:
                size = read_length(stream)
                if size is None:
                    break
                self._mid_reply = bool(size & DATA_FLAG) or size > len(HEARTBEAT_FRAME)
                if size & DATA_FLAG:
                    reply = self._data_frame(stream, size & ~DATA_FLAG)
                else:
                    body = read_body(stream, size, MAX_REPLY_FRAME)
                    reply = decode(body, clean=True)
                    del body
            except FrameTooLarge as e:
                reason = self._garbage(e)
                break
            except TooManyObjects:
                reason = f"the agent sent a reply of more than {MAX_REPLY_OBJECTS} objects"
                break
            except (Truncated, OSError) as e:
                reason = str(e)
                break
            except Exception:
                reason = "the agent sent a frame that is not valid msgpack"
                break
            self._mid_reply = False
            if reply is None or reply == HEARTBEAT:
                continue  # a data frame nobody asked for (skipped), or the agent's beat
            self._progress = time.monotonic()
            rid = reply.get("id") if isinstance(reply, dict) else None
            with self._lock:
                self._answered = True
                future = self._pending.pop(rid, None) if isinstance(rid, int) else None
                if isinstance(rid, int):
                    self._methods.pop(rid, None)
                    self._sinks.pop(rid, None)
            if future is None:
                # Never the reply itself: a hostile one would be copied into the log whole.
                log.warning("the agent answered request %s, which nobody waits for", _id_of(rid))
            else:
                future.set_result(reply)
        self._fail(reason)

    def _heard_now(self) -> None:
        self._heard = now = time.monotonic()
        if self._mid_reply:
            self._progress = now

    def _data_frame(self, stream: Any, size: int) -> dict[str, Any] | None:
        """Read a data frame into the buffer its request named (no copy in between), or
        as bytes for a ``read`` sent through ``call``; returns the reply map it stands
        for. One nobody asked for is skipped unread (None)."""
        head = read_exact(stream, DATA_ID.size)
        if len(head) != DATA_ID.size:
            raise Truncated("the stream ended inside a data frame's header")
        (rid,) = DATA_ID.unpack(head)
        with self._lock:
            sink = self._sinks.pop(rid, None)
            waited = rid in self._pending
        if sink is not None and len(sink) == size:
            read_into(stream, sink)
            return {"id": rid, "result": size}
        if sink is None and waited and size <= MAX_REPLY_FRAME:
            data = read_exact(stream, size) if size else b""
            if len(data) != size:
                raise Truncated(f"the stream ended {size - len(data)} bytes short of a data frame")
            return {"id": rid, "result": bytes(data)}
        if not skip(stream, size):
            raise Truncated("the stream ended inside a data frame")
        if sink is not None:
            return _wrong_size(rid, size, len(sink))
        log.warning("the agent sent %d bytes for request %d, which nobody waits for", size, rid)
        return None

    def _watch(self) -> None:
        """Fail what waits behind a dead link, or for an answer that never begins."""
        while True:
            time.sleep(WATCH_S)
            with self._lock:
                if self._lost is not None:
                    return
                if not self._pending:
                    continue
                now = time.monotonic()
                method = self._methods.get(min(self._pending), "a request")
                if self._beating and now - self._heard > LINK_SILENCE_S:
                    dead = (
                        f"{self.name} has said nothing for {LINK_SILENCE_S:.0f} s while "
                        f"{method} waited; the connection is dead, reconnect to continue."
                    )
                    self._lost = dead
                    failed: dict[int, Exception] = {
                        rid: ConnectionLost(dead) for rid in self._pending
                    }
                elif now - self._progress > ANSWER_TIMEOUT_S:
                    self._progress = now
                    failed = {
                        rid: AgentError(
                            f"{self.name} did not answer {self._methods.get(rid, 'a request')} "
                            f"within {ANSWER_TIMEOUT_S:.0f} s; the agent may be stuck on "
                            "files it cannot read.",
                            AGENT_FAULT,
                        )
                        for rid in self._pending
                    }
                else:
                    continue
                futures = [(self._pending.pop(rid), error) for rid, error in failed.items()]
                for rid in failed:
                    self._methods.pop(rid, None)
                    self._sinks.pop(rid, None)
            for future, error in futures:
                future.set_exception(error)
            if self._lost is not None:
                self._proc.kill()  # the reader then sees the end and tells on_lost

    def _garbage(self, e: FrameTooLarge) -> str:
        text = e.size.to_bytes(4, "big")
        if all(32 <= b < 127 or b in (9, 10, 13) for b in text):
            return (
                f"text was printed before the agent started ({text.decode()!r}...); "
                "make the shell's startup files quiet for non-interactive sessions"
            )
        return f"the agent sent {e}"

    def _fail(self, reason: str) -> None:
        # Closing stdin ends an agent that is still running (say, after garbage on stdout).
        with self._write_lock:
            try:
                self._stdin.close()
            except OSError:
                pass
        try:
            code = self._proc.wait(timeout=EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            code = None
            self._proc.kill()
        self._stderr_thread.join(timeout=1.0)
        with self._lock:
            stderr = b"".join(self._tail).decode("utf-8", "replace")
            if self._lost is None:
                if self._answered:
                    self._lost = self.explain_drop(code, reason)
                elif code is None or code == 0:
                    self._lost = f"the agent ({self.name}) did not answer ({reason})."
                else:
                    self._lost = self.explain_exit(code, stderr, reason)
            pending, self._pending = self._pending, {}
            self._sinks.clear()
            self._methods.clear()
            message = self._lost
            closed_by_us = self._closed
        for future in pending.values():
            future.set_exception(ConnectionLost(message))
        if self.on_lost is not None and self._answered and not closed_by_us:
            try:
                self.on_lost(message)
            except Exception:
                log.exception("on_lost failed")


SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()
"""``python -m`` puts the working folder first on ``sys.path``; the viewer is often started
in a project whose ``utils.py`` or ``queue.py`` would then shadow what the agent imports."""


class LocalProcessClient(PipeClient):
    """``tvis agent --stdio`` over a folder on this machine, in a process of its own: what
    the viewer uses. In the viewer's process the agent's Python work (Replay's event list
    of a big run takes a second or more) would hold the interpreter lock the screen needs;
    in its own process it runs beside the screen on another core."""

    def __init__(
        self,
        root: Path | str,
        *,
        echo_stderr: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not Path(root).is_dir():
            raise AgentError(f"{root} is not a folder.", NOT_FOUND)
        self.root = str(root)
        argv = [sys.executable, *SAFE_PATH, "-m", "tvis", "agent", "--stdio", "--root", self.root]
        super().__init__(argv, name="the local agent", echo_stderr=echo_stderr, env=env)

    def describe(self) -> str:
        return f"local {self.root}"


class SshClient(PipeClient):
    """``ssh [-J hops] host tvis agent --stdio --root PATH``, sharing the ssh connection
    (ControlMaster) unless the user's config already chose how."""

    def __init__(
        self,
        target: Target,
        *,
        ssh_command: Sequence[str] | None = None,
        control_dir: Path | None = None,
        share_connection: bool = True,
        echo_stderr: bool = True,
    ) -> None:
        self.target = target
        program = list(ssh_command) if ssh_command else ssh.ssh_program()
        config = ssh.effective_config(program, target.host or "")
        control = (control_dir or ssh.control_dir()) if share_connection else None
        if config.get("controlpath", "none") != "none":
            control = None  # the user's own ControlPath applies
        self.control_dir = control
        super().__init__(
            ssh.ssh_argv(target, program, config, control),
            name=target.host or "",
            echo_stderr=echo_stderr,
        )

    def describe(self) -> str:
        return self.target.describe()

    def explain_exit(self, code: int | None, stderr: str, reason: str) -> str:
        return ssh.explain_exit(self.target, code, stderr)


class _Watched:
    """A stream that calls ``heard()`` each time bytes arrive on it."""

    def __init__(self, stream: Any, heard: Callable[[], None]) -> None:
        self.stream = stream
        self.heard = heard

    def readinto(self, view: memoryview) -> int:
        n = self.stream.readinto(view)
        if n:
            self.heard()
        return n

    def read(self, n: int) -> bytes:
        data = self.stream.read(n)
        if data:
            self.heard()
        return data


def _id_of(rid: Any) -> str:
    """A request id for a log line: the number, or the type of what stood in its place."""
    return str(rid) if isinstance(rid, int) else f"<{type(rid).__name__}>"


VALUE_KINDS = "biufc"
"""What stored values can be: booleans, integers, floats, complex (bf16 travels as uint16)."""


def empty_for(value: Any, what: str) -> np.ndarray:
    """A new array to read the values an entry's ``value`` record describes into, after
    checking the record, so a record that is not a tensor's (an object dtype, a shape of
    strings, more bytes than this machine holds) is one sentence and nothing allocated."""
    import numpy as np

    try:
        dtype = np.dtype(value["dtype"])
        shape = tuple(value["shape"])
    except (KeyError, TypeError, ValueError):
        raise AgentError(f"the agent described {what} with no usable dtype and shape.") from None
    if dtype.kind not in VALUE_KINDS or dtype.hasobject:
        raise AgentError(f"the agent described {what} as {dtype.str!r} values, not numbers.")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise AgentError(f"the agent described {what} with a shape that is not sizes.")
    nbytes = dtype.itemsize
    for n in shape:
        nbytes *= n
    memory = _memory_bytes()
    if nbytes > memory:
        raise AgentError(
            f"{what} would take {nbytes / 2**30:.1f} GiB, more than this machine's "
            f"{memory / 2**30:.1f} GiB."
        )
    try:
        return np.empty(shape, dtype)
    except (MemoryError, ValueError) as e:
        raise AgentError(f"cannot hold {what} here ({e}).") from None


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 1 << 40  # not a POSIX system: numpy's own MemoryError still speaks


def _touch(region: memoryview) -> None:
    """Fault in the pages of ``region`` (one write per 4 KiB page) before a pipe read lands
    there. A fresh array's first touch inside the kernel's pipe read, on huge pages, cost
    0.3–0.6 s of kernel time per 196 MiB over the loopback sshd and halved the throughput;
    touched here, while earlier chunks are still on their way, it costs a few ms."""
    import numpy as np

    np.frombuffer(region, np.uint8)[::4096] = 0


def _fill(into: memoryview, data: memoryview, rid: int) -> dict[str, Any]:
    if len(data) != len(into):
        return _wrong_size(rid, len(data), len(into))
    into[:] = data
    return {"id": rid, "result": len(data)}


def _wrong_size(rid: int, got: int, wanted: int) -> dict[str, Any]:
    message = f"the agent sent {got} bytes where {wanted} were asked for; the run may have changed."
    return {"id": rid, "error": message, "status": AGENT_FAULT}


def _older_agent(error: AgentError) -> AgentError:
    """The agent's own sentence, unless it predates ``read``: then say what to do."""
    if error.status == BAD_REQUEST and error.message.startswith("unknown method 'read'"):
        return AgentError(
            "the agent is older than this tvis and cannot send raw values; upgrade tvis "
            "where the runs are.",
            BAD_REQUEST,
        )
    return error


def connect(
    target: Target,
    *,
    allow_empty: bool = False,
    ssh_command: Sequence[str] | None = None,
    control_dir: Path | None = None,
    echo_stderr: bool = True,
) -> Client:
    """A client for ``target`` that has shaken hands with its agent.

    Raises ``AgentError`` (one sentence) when the agent cannot be reached, speaks another
    protocol version, or (unless ``allow_empty``) has no runs under its root.
    """
    client = open_client(
        target,
        ssh_command=ssh_command,
        control_dir=control_dir,
        echo_stderr=echo_stderr,
    )
    return greet(client, target, allow_empty)


def open_client(
    target: Target,
    *,
    ssh_command: Sequence[str] | None = None,
    control_dir: Path | None = None,
    echo_stderr: bool = True,
    own_process: bool = False,
    env: Mapping[str, str] | None = None,
) -> Client:
    """A client for ``target``, its agent (or ssh) started but not yet spoken to; a local
    agent's process gets ``env`` (default: this process's environment)."""
    if target.is_local and not own_process:
        return LocalClient(target.path)
    if target.is_local:
        return LocalProcessClient(target.path, echo_stderr=echo_stderr, env=env)
    return SshClient(
        target, ssh_command=ssh_command, control_dir=control_dir, echo_stderr=echo_stderr
    )


def greet(client: Client, target: Target, allow_empty: bool = False) -> Client:
    """``client`` once it has shaken hands with its agent (closed if that fails)."""
    return _greet(client, target, allow_empty, list_runs=False)[0]


def greet_and_list(
    client: Client, target: Target, allow_empty: bool = False
) -> tuple[Client, list[dict[str, Any]]]:
    """``greet``, and the runs under the agent's root, both asked before either is answered:
    one round trip, not two. When the handshake fails (another protocol, no runs) its error
    is the one raised, whatever the list's answer was."""
    return _greet(client, target, allow_empty, list_runs=True)


def _greet(
    client: Client, target: Target, allow_empty: bool, list_runs: bool
) -> tuple[Client, Any]:
    try:
        hello = client.say_hello()
        listing = client.send_ahead("runs") if list_runs else None
        info = client.greeted(hello)
        if not allow_empty and not info.get("runs"):
            where = target.path if target.is_local else f"{target.host}:{target.path}"
            raise AgentError(
                f"no tvis runs under {where}; point at a folder that holds tvis_runs or a run.",
                NOT_FOUND,
            )
        runs = None if listing is None else result_of(listing.result())
    except BaseException:
        client.close()
        raise
    return client, runs
