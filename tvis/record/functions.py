"""Project functions as calls, through the recorder's call hook (``call_hook.py``).

The hook runs on every Python call once the first batch opens (on Python ≥ 3.12, on a
library code object's first call only), decides from a per-code-object cache and ignores
library code, so only project frames get their return watched. A module's own ``forward``
is merged into the module's call instead of appearing twice.
"""

from __future__ import annotations

import inspect
import threading
from functools import partial

import torch

from tvis.record import backward_loss, ops
from tvis.record.builder import Call
from tvis.record.call_hook import MonitoringHook, SettraceHook, new_call_hook
from tvis.record.data import note_normalize
from tvis.record.extension import Extension


class FunctionTracer(Extension):
    """Records calls of functions defined under the project directory."""

    def __init__(self) -> None:
        self.recorder = None
        self.hook: SettraceHook | MonitoringHook | None = None

    def install(self, recorder) -> None:
        self.recorder = recorder
        self.project = recorder.project
        hook = new_call_hook(self.project.is_traced, self._on_call)
        if hook is None:
            recorder.notice(
                "another tracer (a debugger or coverage) is active, so project functions "
                "are not traced in this run; modules still are.",
                level="info",
            )
            return
        self.hook = recorder.call_hook = hook

    def uninstall(self, recorder) -> None:
        if self.hook is not None:
            self.hook.stop()
        recorder.call_hook = None

    def on_batch_open(self, recorder, batch) -> None:
        # Nothing is recorded before a batch opens: start only now, so the script's
        # imports and set-up run at full speed. Only the thread that trains is traced.
        hook = self.hook
        if hook is not None and not hook.started and threading.get_ident() == recorder.thread:
            hook.start()

    def on_thread_adopted(self, recorder) -> None:
        # The hook is per thread: calls the training thread makes from now on are seen.
        if self.hook is not None and self.hook.started:
            self.hook.start()

    # While any trace function is set, CPython 3.11 runs every frame on its slow path, so
    # quiet stretches (dataset items past the kept samples) run with none at all. (With
    # sys.monitoring only the project's own functions pay, and lifting is a flag.)
    def pause(self) -> None:
        if self.hook is not None:
            self.hook.lift()

    def resume(self) -> None:
        if self.hook is not None:
            self.hook.put_back()

    def _on_call(self, frame):
        code = frame.f_code
        rec = self.recorder
        # No batch open: before the first (nothing is recorded yet), or after a step
        # closed its batch, where a call (``train_step()``) starts the next one.
        if rec.paused or rec.stopped or rec.busy or (rec.batch is None and not rec.next_index):
            return None
        if rec.rerun():
            return None
        with rec.work:
            try:
                return self._enter(rec, frame, code)
            except Exception as e:
                rec.guard(f"tracing {code.co_name}", e)
                return None

    def _enter(self, rec, frame, code):
        top = rec.stack[-1] if rec.stack else None
        if top is not None and top.kind in ("module", "loss") and top.frame is None:
            if code.co_name == "forward" and top.project:
                top.frame = frame  # the module's own forward: merged, not a new call
                return None
        if rec.batch is not None and (top is None or top.owner != rec.batch.index):
            rec.function_boundary()
        batch = rec.ensure_batch()
        if batch.full or rec.dropping():
            rec.drop_call(batch, _name(code), None)
            return None
        call = Call(
            id=0,
            parent=-1,
            depth=0,
            kind="function",
            name=_name(code),
            cls=None,
            phase=rec._phase() if not rec.in_loss else "loss",
            definition=[self.project.relpath(code.co_filename), code.co_firstlineno],
            site=rec.project.caller(frame),
            t0=0.0,
            no_grad=not torch.is_grad_enabled(),
            frame=frame,
            project=True,
        )
        back = frame.f_back
        if back is not None and rec.project.relpath(back.f_code.co_filename) is not None:
            call.line_key = (back.f_code.co_filename, back.f_lineno)
        n_args = code.co_argcount + code.co_kwonlyargcount
        local = frame.f_locals
        if rec.in_data and code.co_name == "__call__":
            note_normalize(rec.data_info, local.get("self"))
        named = [(n, local.get(n)) for n in code.co_varnames[:n_args] if n != "self"]
        call.inputs = batch.args(named, keep_values=not batch.light)
        if not batch.light:
            call.given = named  # re-applied per sample if this call turns out to be the loss
        rec.open_call(batch, call)
        rec.stack_changed()
        call.t0 = (rec.work.started - rec.overhead - batch.started) * 1e3
        return partial(self._exit, call)

    def _exit(self, call: Call, value) -> None:
        rec = self.recorder
        if rec.busy:
            return
        with rec.work:
            try:
                if not rec.stack or rec.stack[-1] is not call:
                    return  # carried into another batch or cut off by an exception
                rec.stack.pop()
                rec.stack_changed()
                frame, call.frame = call.frame, None
                given, call.given = call.given, None
                batch = rec.batch
                if batch is None or call.owner != batch.index:
                    return
                if given is not None and value is not None:
                    made_by = ("call", call, _function_of(frame), (), dict(given))
                    backward_loss.note_scalar(batch, value, made_by)
                call.fwd_ms = (rec.work.started - rec.overhead - batch.started) * 1e3 - call.t0
                call.outputs = batch.args([("return", value)], keep_values=not batch.light)
                ops.note_call_result(rec, batch, call, value)
                if not batch.light and torch.is_grad_enabled():
                    rec.watch_gradients(batch, call)
                if batch.step is not None:
                    rec.end_stepped_batch()
            except Exception as e:
                rec.guard(f"tracing the return of {call.name}", e)


def _name(code) -> str:
    return code.co_qualname if hasattr(code, "co_qualname") else code.co_name


def _function_of(frame):
    """The function (or bound method) a frame runs, to call it again; None when it cannot
    be called with its named arguments alone (``*args``) or is not found by name."""
    code = frame.f_code
    if code.co_flags & inspect.CO_VARARGS:
        return None
    fn = frame.f_globals.get(code.co_name)
    if getattr(fn, "__code__", None) is code:
        return fn
    owner = frame.f_locals.get("self")
    method = getattr(owner, code.co_name, None) if owner is not None else None
    if getattr(getattr(method, "__func__", None), "__code__", None) is code:
        return method
    return None
