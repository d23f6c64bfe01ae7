"""torchvision transforms, stage by stage.

v2 transforms, and most v1 ones (``Resize``, ``Normalize``, ``RandomCrop``), are
``nn.Module``s: torch's module hooks already record each call with its input and output,
and this extension labels those calls ``transform``. The v1 classes that are not modules
(``Compose``, ``ToTensor``, ``Lambda``, ``ToPILImage``, ...) get their ``__call__`` wrapped,
so a v1 ``Compose`` becomes a call holding one call per stage, each with its output. PIL
images are kept as pictures (``BatchBuilder.image``) for the first samples of a batch;
Normalize's mean and std are remembered so the agent can show images un-normalized.

torchvision is wrapped only once the script has imported it: importing it for a script
that does not use it would cost time and change what the script runs.
"""

from __future__ import annotations

import functools
import sys

import torch

from tvis.record.data import note_normalize
from tvis.record.extension import Extension
from tvis.record.wrapped import call_through

V1 = "torchvision.transforms.transforms"
PACKAGE = "torchvision.transforms"


class Transforms(Extension):
    """Records torchvision transform stages as ``transform`` calls."""

    def install(self, recorder) -> None:
        self.wrapped = False
        self.refresh(recorder)

    def refresh(self, recorder) -> None:
        """Wrap torchvision's v1 non-module transforms if the script has imported them."""
        module = sys.modules.get(V1)
        if module is None or self.wrapped:
            return
        self.wrapped = True
        for name in getattr(module, "__all__", ()):
            cls = getattr(module, name, None)
            if (
                isinstance(cls, type)
                and not issubclass(cls, torch.nn.Module)
                and "__call__" in cls.__dict__
            ):
                recorder.patches.set(cls, "__call__", _stage(recorder, cls.__dict__["__call__"]))

    def on_module_exit(self, recorder, batch, call, module, output) -> None:
        if type(module).__module__.startswith(PACKAGE):
            call.kind = "transform"
            note_normalize(recorder.data_info, module)


def _stage(rec, original):
    @functools.wraps(original)
    def stage(transform, *args, **kwargs):
        try:
            note_normalize(rec.data_info, transform)
        except Exception as e:
            rec.guard("reading a Normalize transform", e)
        named = [(f"in[{i}]" if i else "img", a) for i, a in enumerate(args)]
        return call_through(
            rec,
            "transform",
            _name(transform),
            original,
            (transform, *args),
            kwargs,
            named + list(kwargs.items()),
            cls=type(transform).__name__,
        )

    return stage


def _name(transform) -> str:
    name = type(transform).__name__
    if name == "Lambda":
        inner = getattr(getattr(transform, "lambd", None), "__name__", None)
        if inner and inner != "<lambda>":
            return f"Lambda({inner})"
    return name
