"""SIGTERM and SIGHUP end a recording as Ctrl-C does: the run is finished, then the
process dies of the signal.

SLURM sends SIGTERM at a job's time limit and on ``scancel``; the ssh session of a
`tvis run` that drops sends SIGHUP. Python's default for both is to die at once, which
leaves the run "incomplete" without its sources, anomaly summary or final index. While
recording, a handler raises ``Terminated`` in the script's thread instead (unwinding like
``KeyboardInterrupt``); the runner finishes the run, and ``die_of`` ends the process with
the signal's own disposition, so the launcher sees the same death (shell status 143 / 129).
A signal the script's launcher set to be ignored (``nohup``) stays ignored, and a handler the
script installs itself replaces tvis's, as it would replace Python's default. A Ctrl-C or
signal raised where it cannot propagate (a weakref callback) is dropped without Python's
"Exception ignored" traceback.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(BaseException):
    """Raised into the script when SIGTERM or SIGHUP arrives during a recording."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class SignalEnd:
    """tvis's handlers for SIGTERM and SIGHUP, for the length of a recording."""

    def __init__(self) -> None:
        self.previous: dict[int, object] = {}
        self.received: int | None = None
        self.finishing = False  # the run is being finished: a second signal waits for it
        self._unraisable = sys.unraisablehook

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers (an in-process recording)
        for signum in SIGNALS:
            if signal.getsignal(signum) is signal.SIG_DFL:
                self.previous[signum] = signal.signal(signum, self._handle)
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = self._drop_interrupts

    def finish(self) -> None:
        """From now on a signal is noted, not raised: the run is being written."""
        self.finishing = True

    def restore(self) -> None:
        for signum, previous in self.previous.items():
            if signal.getsignal(signum) == self._handle:
                signal.signal(signum, previous)
        self.previous.clear()
        if sys.unraisablehook == self._drop_interrupts:
            sys.unraisablehook = self._unraisable

    def _drop_interrupts(self, unraisable) -> None:
        """A signal raised where Python cannot raise it — a weakref callback or ``__del__``,
        which run whenever the script's tensors are freed — would be printed as "Exception
        ignored in …" with a traceback, and lost. A Ctrl-C there is dropped quietly (most
        often the second, as the first unwinds); SIGTERM or SIGHUP is sent again, so the
        run still ends when a time limit says so."""
        if issubclass(unraisable.exc_type, Terminated):
            if not self.finishing:  # raised here it would be lost again: sent from a thread
                again = (os.getpid(), unraisable.exc_value.signum)
                _thread.start_new_thread(os.kill, again)  # (Thread.start would wait here)
        elif not issubclass(unraisable.exc_type, KeyboardInterrupt):
            self._unraisable(unraisable)

    def _handle(self, signum: int, frame) -> None:
        self.received = self.received or signum
        if not self.finishing:
            raise Terminated(signum)


# What usually sends each signal, for the run's error line.
_SENDERS = {
    "SIGTERM": "a time limit, scancel or kill",
    "SIGHUP": "the terminal or ssh session closed",
}


def ended_by(signum: int) -> str:
    """The run's error line for a recording ended by ``signum``."""
    name = signal.Signals(signum).name
    return f"ended by {name} ({_SENDERS.get(name, 'a signal')})"


def die_of(signum: int) -> None:
    """End the process as ``signum`` would have, had tvis not caught it."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # the terminal is gone (SIGHUP): nothing more to say
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # not reached where the signal kills; a last resort elsewhere
