"""How the recorder sees Python calls start and return: one small backend.

``SettraceHook`` is built on ``sys.settrace``, which every Python tvis supports. The
function tracer and the recorder's work bracket use only the methods below, so a
``sys.monitoring`` backend (Python ≥ 3.12: PY_START and PY_RETURN events, with DISABLE
for library code objects so they run at full speed afterwards) can take its place.

While a trace function is set, CPython 3.11 runs every frame of the thread on its slow
path and calls the trace function for each: so the hook is started only when the first
batch opens (imports, building the dataset, the model and the optimizer run untraced),
and tvis lifts it while it works and for stretches it does not observe.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType, FrameType

# ``wants(code)`` is asked once per call and must not change its answer for a code object
# (a sys.monitoring backend disables the code objects it refuses). ``on_call(frame)``
# then decides: None to ignore the frame, or a function that receives its return value.
Wants = Callable[[CodeType], bool]
OnCall = Callable[[FrameType], Callable[[object], None] | None]


class SettraceHook:
    """Calls ``on_call`` for the Python calls ``wants`` of the threads it was started on."""

    def __init__(self, wants: Wants, on_call: OnCall) -> None:
        self.wants = wants
        self.on_call = on_call
        self.started = False
        # One bound method, so ``sys.gettrace()`` can tell it apart by identity.
        self._trace = self._global

    def start(self) -> None:
        """See the calls of the calling thread from now on (once per thread)."""
        self.started = True
        sys.settrace(self._trace)

    def stop(self) -> None:
        """See no more calls; a thread still running lifts the hook at its next call."""
        self.started = False
        if sys.gettrace() is self._trace:
            sys.settrace(None)

    def lift(self) -> bool:
        """Take the hook off this thread for a while; whether it was on."""
        if sys.gettrace() is self._trace:
            sys.settrace(None)
            return True
        return False

    def put_back(self) -> None:
        """Undo ``lift``: on again, unless stopped or another tracer took the thread."""
        if self.started and sys.gettrace() is None:
            sys.settrace(self._trace)

    def _global(self, frame, event, arg):
        if not self.started:
            sys.settrace(None)  # a thread still running after the run
            return None
        if not self.wants(frame.f_code):
            return None
        on_return = self.on_call(frame)
        if on_return is None:
            return None
        frame.f_trace_lines = False

        def local(frame, event, arg):
            if event == "return":
                on_return(arg)
            return local

        return local
