"""The shape produced by each line of project code, through a ``TorchFunctionMode``.

Each torch op is attributed to the innermost project frame that is running it; ops that
run inside library modules (``nn.Conv2d``'s own ``F.conv2d``) are ignored, since the
module's call already records its output.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from tvis.record import attention
from tvis.record.extension import Extension


class LineOps(Extension):
    """Installs the mode for the length of the recording."""

    def install(self, recorder) -> None:
        self.mode = _LineMode(recorder)
        self.mode.__enter__()

    def uninstall(self, recorder) -> None:
        self.mode.__exit__(None, None, None)


class _LineMode(TorchFunctionMode):
    def __init__(self, recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        rec = self.recorder
        stack = rec.stack
        if rec.busy or not stack or rec.paused:
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
