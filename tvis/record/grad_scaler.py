"""Mixed precision's ``GradScaler``: backward runs on ``loss × scale``.

``scaler.scale(loss).backward()`` multiplies the loss, and with it every gradient that
backward computes, by the scaler's current scale (65536 to start). The optimizer never sees
those values: ``scaler.step`` unscales the parameters' gradients first. So the recorder
divides the scale back out of what it records during such a backward (the batch's loss and
each dL/d(activation)), and notes it as the batch's ``grad_scale``. The scale is a power of
two, so the division is exact.
"""

from __future__ import annotations

import weakref

import torch

from tvis.record.extension import Extension


class GradScaling(Extension):
    """Notes which tensor ``GradScaler.scale`` returned last, and by what it scaled."""

    def install(self, recorder) -> None:
        self.scaled: tuple[weakref.ref, object] | None = None

        def note(out, scaler) -> None:
            self.scaled = (weakref.ref(out), scaler)

        note_scaled(recorder.patches, note)

    def before_backward(self, recorder, batch, loss) -> None:
        if self.scaled is None or not isinstance(loss, torch.Tensor):
            return
        ref, scaler = self.scaled
        if ref() is loss:
            factor = float(scaler.get_scale())
            if factor and factor != 1.0:
                batch.grad_scale = factor


def note_scaled(patches, note) -> None:
    """Patch ``GradScaler.scale`` (through ``patches``) to call ``note(out, scaler)`` with each
    scaled tensor it returns."""
    # torch.amp's since torch 2.3 (torch.cuda.amp's subclasses it); torch.cuda.amp's before.
    scaler_class = getattr(torch.amp, "GradScaler", None) or torch.cuda.amp.GradScaler
    original = scaler_class.scale

    def scale(scaler, outputs):
        out = original(scaler, outputs)
        if isinstance(out, torch.Tensor):
            note(out, scaler)
        return out

    patches.set(scaler_class, "scale", scale)
