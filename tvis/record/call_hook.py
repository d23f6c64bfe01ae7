"""How the recorder sees Python calls start and return: two backends, one interface.

``MonitoringHook`` (Python ≥ 3.12) is built on ``sys.monitoring``. Its PY_START callback
asks ``wants`` once per code object and returns ``DISABLE`` for the ones refused, so
library code runs at full speed afterwards; return events are enabled only on the code
objects wanted. Events are process-wide: the callbacks ignore threads that did not call
``start``, and ``lift``/``put_back`` flip a per-thread flag.

``SettraceHook`` is built on ``sys.settrace`` (Python 3.10 and 3.11, or when another
monitoring tool holds the ids tvis would use). While a trace function is set, CPython runs
every frame of the thread on its slow path and calls the trace function for each: so the
hook is started only when the first batch opens (imports, building the dataset, the model
and the optimizer run untraced), and tvis lifts it while it works and for stretches it
does not observe. While it is on, ``sys.gettrace()`` answers for the script as if it were
not (a script that checks for a debugger must train as it does without tvis).

Both report what settrace reports: an entry at each call and at each resumption of a
generator or coroutine (``next``, ``send`` and ``throw``), an exit at each return and each
yield, with the value, and at each exit by an exception, with None.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from threading import get_ident
from types import CodeType, FrameType

# ``wants(code)`` is asked once per call and must not change its answer for a code object
# (the sys.monitoring backend disables the code objects it refuses). ``on_call(frame)``
# then decides: None to ignore the frame, or a function that receives its return value.
Wants = Callable[[CodeType], bool]
OnCall = Callable[[FrameType], Callable[[object], None] | None]

_gettrace = sys.gettrace  # the interpreter's own, which tvis itself always asks
_hidden: set = set()  # tvis's trace functions, which ``sys.gettrace()`` does not show


def _gettrace_for_script():
    """``sys.gettrace`` while tvis traces: the thread's trace function unless it is tvis's."""
    found = _gettrace()
    return None if found in _hidden else found


def new_call_hook(wants: Wants, on_call: OnCall) -> SettraceHook | MonitoringHook | None:
    """The cheapest backend this Python offers; None when settrace is the only one and
    another tracer (a debugger, coverage) already holds it."""
    if sys.version_info >= (3, 12) and MonitoringHook.free_tool() is not None:
        return MonitoringHook(wants, on_call)
    if sys.gettrace() is not None:
        return None
    return SettraceHook(wants, on_call)


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
        _hidden.add(self._trace)
        sys.gettrace = _gettrace_for_script
        sys.settrace(self._trace)

    def stop(self) -> None:
        """See no more calls; a thread still running lifts the hook at its next call."""
        self.started = False
        if _gettrace() is self._trace:
            sys.settrace(None)
        _hidden.discard(self._trace)
        if not _hidden:
            sys.gettrace = _gettrace

    def lift(self) -> bool:
        """Take the hook off this thread for a while; whether it was on."""
        if _gettrace() is self._trace:
            sys.settrace(None)
            return True
        return False

    def put_back(self) -> None:
        """Undo ``lift``: on again, unless stopped or another tracer took the thread."""
        if self.started and _gettrace() is None:
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


class MonitoringHook:
    """Calls ``on_call`` for the Python calls ``wants`` of the threads it was started on,
    through ``sys.monitoring``: a code object refused costs one callback per recording,
    not one per call."""

    # A profiler's id first: tvis observes, it does not step. sys.settrace itself uses
    # neither (it has ids of its own), so a debugger or coverage on settrace leaves both free.
    TOOL_IDS = (2, 0)  # sys.monitoring.PROFILER_ID, DEBUGGER_ID

    def __init__(self, wants: Wants, on_call: OnCall) -> None:
        self.wants = wants
        self.on_call = on_call
        self.started = False
        self._tool: int | None = None
        self._threads: set[int] = set()  # the threads started
        self._on: set[int] = set()  # the threads started and not lifted
        # Per thread, the entries whose return is watched: (frame, on_return). Entries and
        # exits of a thread nest, so an exit belongs to the top entry or to none.
        self._stacks: dict[int, list[tuple[FrameType, Callable[[object], None]]]] = {}
        self._watched: set[CodeType] = set()  # code objects wanted, with local events on

    @classmethod
    def free_tool(cls) -> int | None:
        """A tool id no other tool holds, or None."""
        for tool in cls.TOOL_IDS:
            if sys.monitoring.get_tool(tool) is None:
                return tool
        return None

    def start(self) -> None:
        """See the calls of the calling thread from now on (once per thread)."""
        if not self.started and not self._claim():
            return
        thread = get_ident()
        self._threads.add(thread)
        self._on.add(thread)
        self._stacks.setdefault(thread, [])

    def stop(self) -> None:
        """See no more calls, on any thread; the tool id is free again."""
        if not self.started:
            return
        self.started = False
        mon, tool = sys.monitoring, self._tool
        mon.set_events(tool, 0)
        for code in self._watched:
            mon.set_local_events(tool, code, 0)
        for event in _CALLBACKS:
            mon.register_callback(tool, event, None)
        mon.free_tool_id(tool)
        self._tool = None
        self._threads.clear()
        self._on.clear()
        self._stacks.clear()
        self._watched.clear()

    def lift(self) -> bool:
        """Take the hook off this thread for a while; whether it was on."""
        thread = get_ident()
        if thread in self._on:
            self._on.discard(thread)
            return True
        return False

    def put_back(self) -> None:
        """Undo ``lift``: on again for a thread started, unless stopped."""
        thread = get_ident()
        if self.started and thread in self._threads:
            self._on.add(thread)

    def _claim(self) -> bool:
        tool = self.free_tool()
        if tool is None:
            return False  # taken since new_call_hook chose this backend: see nothing
        mon, events = sys.monitoring, sys.monitoring.events
        mon.use_tool_id(tool, "tvis")
        self._tool = tool
        for event, name in _CALLBACKS.items():
            mon.register_callback(tool, event, getattr(self, name))
        # DISABLE lasts until restart_events: without it, code objects refused in an
        # earlier recording of this process would stay unseen.
        mon.restart_events()
        mon.set_events(tool, events.PY_START | events.PY_THROW | events.PY_UNWIND)
        self.started = True
        return True

    def _wanted(self, code: CodeType) -> bool:
        """Whether ``wants`` wants ``code``; its exits are watched from its first entry."""
        if code in self._watched:
            return True
        if not self.wants(code):
            return False
        self._watched.add(code)
        events = sys.monitoring.events
        local = events.PY_RESUME | events.PY_RETURN | events.PY_YIELD
        sys.monitoring.set_local_events(self._tool, code, local)
        return True

    # The callbacks. A code object wanted keeps its events whatever the thread or the flag:
    # only a refusal by ``wants`` disables one, and that holds for every thread.

    def _on_start(self, code: CodeType, offset: int):
        if not self._wanted(code):
            return sys.monitoring.DISABLE
        self._enter(sys._getframe(1))
        return None

    def _on_resume(self, code: CodeType, offset: int) -> None:
        self._enter(sys._getframe(1))  # a local event: only code objects watched

    def _on_throw(self, code: CodeType, offset: int, exc: BaseException) -> None:
        # A global event, which cannot be disabled; the first entry of a generator thrown
        # into before it started.
        if self._wanted(code):
            self._enter(sys._getframe(1))

    def _on_return(self, code: CodeType, offset: int, value: object) -> None:
        self._exit(sys._getframe(1), value)

    def _on_unwind(self, code: CodeType, offset: int, exc: BaseException) -> None:
        if code in self._watched:
            self._exit(sys._getframe(1), None)

    def _enter(self, frame: FrameType) -> None:
        thread = get_ident()
        # Read once: ``stop`` on another thread may clear the stacks meanwhile.
        stack = self._stacks.get(thread) if thread in self._on else None
        if stack is None:
            return
        on_return = self.on_call(frame)
        if on_return is not None:
            stack.append((frame, on_return))

    def _exit(self, frame: FrameType, value: object) -> None:
        thread = get_ident()
        stack = self._stacks.get(thread)
        if not stack or stack[-1][0] is not frame:
            return  # an unobserved thread, or an entry on_call ignored
        on_return = stack.pop()[1]
        if thread in self._on:  # lifted: the exit is not seen, as with settrace
            on_return(value)


# The method each event calls. PY_START, PY_THROW and PY_UNWIND are set for the whole
# process (the last two cannot be set per code object before Python 3.15); PY_RESUME,
# PY_RETURN and PY_YIELD per code object wanted.
_CALLBACKS = (
    {}
    if sys.version_info < (3, 12)
    else {
        sys.monitoring.events.PY_START: "_on_start",
        sys.monitoring.events.PY_RESUME: "_on_resume",
        sys.monitoring.events.PY_THROW: "_on_throw",
        sys.monitoring.events.PY_RETURN: "_on_return",
        sys.monitoring.events.PY_YIELD: "_on_return",
        sys.monitoring.events.PY_UNWIND: "_on_unwind",
    }
)
