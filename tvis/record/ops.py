"""The shape produced by each line of project code, through a ``TorchFunctionMode``.

Each torch op is attributed to the innermost project frame that is running it. Inside
library modules (``nn.Conv2d``'s own ``F.conv2d``) the mode is taken off the stack, so
their ops run at full speed: the module's call already records its output.
"""

from __future__ import annotations

import os
import sys
import warnings
from functools import partial

import torch
from torch.overrides import TorchFunctionMode

from tvis.record import anomalies, attention, backward_loss, tensors
from tvis.record.compiled import compiling
from tvis.record.extension import Extension


class LineOps(Extension):
    """Keeps the mode installed exactly while project code is innermost."""

    def install(self, recorder) -> None:
        self.mode = _LineMode(recorder)
        self.active = False
        self._wanted_before_pause = False
        show = warnings._showwarnmsg  # type: ignore[attr-defined]
        recorder.patches.set(warnings, "_showwarnmsg", partial(_at_user_line, show))
        self._set(True)

    def uninstall(self, recorder) -> None:
        self._set(False)

    def pause(self) -> None:
        self._wanted_before_pause = self.active
        self._set(False)

    def resume(self) -> None:
        self._set(self._wanted_before_pause)

    def on_call_stack_change(self, recorder) -> None:
        self._set(_wanted(recorder))

    def _set(self, wanted: bool) -> None:
        if wanted == self.active:
            return
        if wanted:
            self.mode.__enter__()
        elif torch.overrides._get_current_function_mode() is self.mode:
            self.mode.__exit__(None, None, None)
        else:
            return  # a mode of the user's sits above ours: leave the stack alone
        self.active = wanted


def _wanted(rec) -> bool:
    """Whether an op run now can be a project line's: under a project function that
    is still recorded, or a project module; at the top level (a script's own loop),
    except inside an optimizer's step, whose ops are the optimizer's (a closure it calls
    is a function of its own). Where none can, ops run without the mode's dispatch."""
    if not rec.stack:
        return not rec.in_step
    top = rec.stack[-1]
    if top is None:
        return False  # a call counted, not recorded
    if top.kind == "function":
        return top.frame is not None  # None: its batch was let go (ops would be dropped)
    return top.project


def _at_user_line(show, message: warnings.WarningMessage) -> None:
    """Show a warning raised by a torch op under the line mode at the user's line, as
    plain Python does, not inside the dispatch the mode adds (this file, or torch's
    ``handle_torch_function``): the first frame outside torch and tvis, past the mode."""
    if message.filename in _DISPATCH:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not _TORCH_FUNCTION:
            frame = frame.f_back
        while frame is not None and frame.f_code.co_filename.startswith(_LIBRARIES):
            frame = frame.f_back
        if frame is not None:
            message.filename, message.lineno = frame.f_code.co_filename, frame.f_lineno
            message.line = None
    show(message)


class _LineMode(TorchFunctionMode):
    def __init__(self, recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        rec = self.recorder
        if compiling() or rec.busy or rec.paused or rec.rerun():
            return func(*args, **kwargs)
        if rec.stack:
            top = rec.stack[-1]
            if top is None or top.frame is None:
                return func(*args, **kwargs)
            frame = top.frame
        else:
            # Top-level code (a script's training loop outside any function): the
            # project line calling this op directly (through torch's wrappers only).
            top, frame = None, _calling_line(rec, sys._getframe(1))
            if frame is None:
                return func(*args, **kwargs)
        start = rec.clock()
        out = func(*args, **kwargs)
        with rec.work:
            try:
                ms = (rec.work.started - rec.overhead - start) * 1e3
                _note(rec, top, frame, func, args, out, ms)
                _note_reduction(rec, frame, func, args, kwargs, out)
                if top is not None and getattr(func, "__name__", None) == "softmax":
                    attention.capture(rec, top, args, kwargs, out)
            except Exception as e:
                rec.guard("attributing an op to its line", e)
        return out


_TORCH_FUNCTION = _LineMode.__torch_function__.__code__
_DISPATCH = (__file__, torch.overrides.__file__)
_LIBRARIES = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))
# torch's Python entry points between a user's line and the op it calls (``x + y`` goes
# through Tensor.__add__, ``F.relu`` through torch.nn.functional): an op called from any
# other library code (inside an optimizer's step) is not the line's own result.
_WRAPPERS = {
    torch.overrides.__file__,
    torch._tensor.__file__,
    torch.functional.__file__,
    torch.nn.functional.__file__,
}


def _calling_line(rec, frame):
    while frame is not None and frame.f_code.co_filename in _WRAPPERS:
        frame = frame.f_back
    if frame is None or rec.project.relpath(frame.f_code.co_filename) is None:
        return None
    return frame


def _target(rec) -> tuple:
    """The batch an op's line belongs to and its lines: the open batch, or — between
    batches (none open yet, or an evaluation group while training code runs again) —
    the next one, which takes these lines when it opens."""
    batch = rec.batch
    if batch is None or (batch.light and torch.is_grad_enabled()):
        return None, rec.early_lines
    return batch, batch.lines


def _note(rec, call, frame, func, args, out, ms: float) -> None:
    name = getattr(func, "__name__", str(func))
    if name.startswith("_") and not name.startswith("__"):
        return  # torch's own bookkeeping (profiler ranges, foreach kernels), not a result
    if name == "__get__":  # a property read (x.T, x.data): named by the property
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    batch, lines = _target(rec)
    # A call opened in an earlier batch (a training loop inside ``main()``) still runs
    # lines that belong to this batch; they are attributed to no call of it.
    owned = batch is not None and call is not None and call.owner == batch.index
    call_id = call.id if owned else None
    line = _line(rec, lines, (frame.f_code.co_filename, frame.f_lineno), call_id)
    _result(line, name, out, ms)
    if batch is not None:
        anomalies.note_op(batch, call_id, func, args, out, line)


def _note_reduction(rec, frame, func, args, kwargs, out) -> None:
    """A full ``mean``/``sum`` on a project line (``(pred - y).pow(2).mean()``): its input
    holds the loss of each element, should backward run on its result."""
    batch = rec.batch
    if (
        batch is None
        or not isinstance(out, torch.Tensor)
        or out.dim() != 0
        or len(args) != 1
        or kwargs
        or getattr(func, "__name__", None) not in backward_loss.REDUCTIONS
    ):
        return
    where = (frame.f_code.co_filename, frame.f_lineno)
    backward_loss.note_scalar(batch, out, ("op", func.__name__, args[0], where))


def note_call_result(rec, batch, call, value) -> None:
    """A module or project-function call's result on the project line that made it: the
    line "only calls a module" (``x = self.conv1(x)``) and shows that module's output."""
    if call.line_key is None:
        return
    parent = call.parent if call.parent >= 0 else None
    line = _line(rec, batch.lines, call.line_key, parent)
    _result(line, call.name, value, call.fwd_ms or 0.0)


def _line(rec, lines: dict, key: tuple[str, int], call_id: int | None) -> dict:
    line = lines.get(key)
    if line is None:
        line = lines[key] = {
            "file": rec.project.relpath(key[0]) or key[0],
            "line": key[1],
            "op": None,
            "shape": None,
            "dtype": None,
            "count": 0,
            "ms": 0.0,
            "call": call_id,
        }
        if not torch.is_grad_enabled():
            line["no_grad"] = True  # a light (no-grad) forward's line
    line["call"] = call_id
    return line


def _result(line: dict, op: str, out, ms: float) -> None:
    """The line's latest result: what its last op or call returned that holds a tensor (a
    later ``.item()`` or ``.device`` read on the line leaves the op and its shape as they
    are); an op without one only where the line has nothing better."""
    first = (
        out
        if isinstance(out, torch.Tensor)
        else next((o for o in out if isinstance(o, torch.Tensor)), None)
        if isinstance(out, (tuple, list))
        else None
    )
    if first is not None:
        line["op"] = op
        line["shape"] = tensors.shape_of(first)
        line["dtype"] = str(first.dtype).removeprefix("torch.")
    elif line["shape"] is None:
        line["op"] = op
    line["count"] += 1
    line["ms"] += ms
