"""Forward time of module calls on CUDA, from events rather than host clocks.

On a GPU the host returns from a kernel launch long before the kernel ends, so host time
says little. Each module call on CUDA records an event pair; the pairs are resolved when
the batch closes (one synchronize per batch, not per call).
"""

from __future__ import annotations

import torch

from tvis.store import schema


def start(call, args: tuple) -> None:
    """Record a start event if the call's first tensor input lives on CUDA."""
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if first is not None and first.is_cuda:
        call.cuda_events = (
            torch.cuda.Event(enable_timing=True),
            torch.cuda.Event(enable_timing=True),
        )
        call.cuda_events[0].record()


def stop(call) -> None:
    if call.cuda_events is not None:
        call.cuda_events[1].record()


def resolve(calls) -> None:
    """Replace host-measured forward times with device times (flagged ``cuda_events``)."""
    timed = [c for c in calls if c.cuda_events is not None]
    if not timed:
        return
    torch.cuda.synchronize()
    for call in timed:
        begin, end = call.cuda_events
        call.fwd_ms = begin.elapsed_time(end)
        call.flags.append(schema.CUDA_EVENTS)
        call.cuda_events = None
