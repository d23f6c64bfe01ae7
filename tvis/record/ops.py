"""The shape produced by each line of project code, through a ``TorchFunctionMode``.

Each torch op is attributed to the innermost project frame that is running it. Inside
library modules (``nn.Conv2d``'s own ``F.conv2d``) the mode is taken off the stack, so
their ops run at full speed: the module's call already records its output.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from tvis.record import attention
from tvis.record.compiled import compiling
from tvis.record.extension import Extension


class LineOps(Extension):
    """Keeps the mode installed exactly while project code is innermost."""

    def install(self, recorder) -> None:
        self.mode = _LineMode(recorder)
        self.active = False
        self._wanted_before_pause = False
        self._set(True)

    def uninstall(self, recorder) -> None:
        self._set(False)

    def pause(self) -> None:
        self._wanted_before_pause = self.active
        self._set(False)

    def resume(self) -> None:
        self._set(self._wanted_before_pause)

    def on_call_stack_change(self, recorder) -> None:
        top = recorder.stack[-1] if recorder.stack else False
        self._set(top is False or (top is not None and (top.kind == "function" or top.project)))

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


class _LineMode(TorchFunctionMode):
    def __init__(self, recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        rec = self.recorder
        stack = rec.stack
        if compiling() or rec.busy or not stack or rec.paused:
            return func(*args, **kwargs)
        top = stack[-1]
        if top is None or top.frame is None:
            return func(*args, **kwargs)
        start = rec.clock()
        out = func(*args, **kwargs)
        with rec.work:
            try:
                _note(rec, top, func, out, (rec.work.started - rec.overhead - start) * 1e3)
                if getattr(func, "__name__", None) == "softmax":
                    attention.capture(rec, top, args, kwargs, out)
            except Exception as e:
                rec.guard("attributing an op to its line", e)
        return out


def _note(rec, call, func, out, ms: float) -> None:
    batch = rec.batch
    if batch is None or call.owner != batch.index:
        return
    frame = call.frame
    key = (frame.f_code.co_filename, frame.f_lineno)
    line = batch.lines.get(key)
    if line is None:
        line = batch.lines[key] = {
            "file": rec.project.relpath(key[0]) or key[0],
            "line": key[1],
            "op": None,
            "shape": None,
            "dtype": None,
            "count": 0,
            "ms": 0.0,
            "call": call.id,
        }
    first = (
        out
        if isinstance(out, torch.Tensor)
        else next((o for o in out if isinstance(o, torch.Tensor)), None)
        if isinstance(out, (tuple, list))
        else None
    )
    line["op"] = getattr(func, "__name__", str(func))
    if first is not None:
        line["shape"], line["dtype"] = list(first.shape), str(first.dtype).removeprefix("torch.")
    line["count"] += 1
    line["ms"] += ms
    line["call"] = call.id
