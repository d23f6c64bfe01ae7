"""Library functions recorded as calls of their own (transform stages, tokenizer calls).

Torch's hooks see modules; a torchvision ``ToTensor`` or a tokenizer is a plain callable,
so its class attribute is wrapped for the length of the recording. The wrapper runs the
library function untouched, outside tvis's own work bracket (project code it calls is
still traced), and records a call around it in the batch that is open.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

from tvis.record.builder import BatchBuilder, Call
from tvis.record.compiled import compiling


def recording(rec) -> BatchBuilder | None:
    """The batch a library call made now is recorded in, or None when it is not (past the
    batch's call cap, ``call_through`` counts the call instead)."""
    if (
        compiling()
        or threading.get_ident() != rec.thread
        or rec.paused
        or rec.busy
        or rec.stopped
        or rec.counting
    ):
        return None
    return rec.batch


def project_site(rec, frame) -> list | None:
    """The innermost project frame at or above ``frame``: where the user made the call."""
    while frame is not None:
        rel = rec.project.relpath(frame.f_code.co_filename)
        if rel is not None:
            return [rel, frame.f_lineno]
        frame = frame.f_back
    return None


def call_through(
    rec,
    kind: str,
    name: str,
    function: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    inputs: list[tuple[str, Any]],
    after: Callable[[BatchBuilder, Call, Any], None] | None = None,
    cls: str | None = None,
) -> Any:
    """``function(*args, **kwargs)``, recorded as a call of ``kind`` when a batch is open.

    ``inputs`` are the named values shown as the call's inputs; ``after(batch, call,
    result)`` adds what this kind of call records beyond its outputs.
    """
    batch = recording(rec)
    if batch is not None and (batch.full or rec.dropping()):
        rec.drop_call(batch, name, cls or name)
        batch = None
    call = _open(rec, batch, kind, name, cls or name, function, inputs) if batch else None
    if call is None:
        return function(*args, **kwargs)
    try:
        result = function(*args, **kwargs)
    except BaseException:
        _pop(rec, call)
        raise
    with rec.work:
        try:
            _close(rec, batch, call, result, after)
        except Exception as e:
            rec.guard(f"recording the output of {name}", e)
    return result


def _open(rec, batch, kind: str, name: str, cls: str, function, inputs) -> Call | None:
    with rec.work:
        try:
            code = getattr(function, "__code__", None)
            call = Call(
                id=0,
                parent=-1,
                depth=0,
                kind=kind,
                name=name,
                cls=cls,
                phase=rec._phase(),
                definition=rec.project.where(code.co_filename, code.co_firstlineno)
                if code
                else None,
                site=project_site(rec, sys._getframe(2)),
                t0=(rec.work.started - rec.overhead - batch.started) * 1e3,
                no_grad=not torch.is_grad_enabled(),
            )
            call.inputs = batch.args(inputs, not batch.light)
            rec.open_call(batch, call)
            return call
        except Exception as e:
            rec.guard(f"recording the call of {name}", e)
            return None


def _pop(rec, call: Call) -> None:
    if rec.stack and rec.stack[-1] is call:
        rec.stack.pop()


def _close(rec, batch, call: Call, result, after) -> None:
    _pop(rec, call)
    if rec.batch is not batch:
        return
    call.fwd_ms = (rec.work.started - rec.overhead - batch.started) * 1e3 - call.t0
    call.outputs = batch.args([("out", result)], not batch.light)
    if after is not None:
        after(batch, call, result)
