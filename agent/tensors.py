"""The agent API's methods on one tensor of a batch or step: its entry, a 2-D view of it,
an input picture, its values as an array or as raw bytes, and a parameter's view at a step
(see PROTOCOL.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent import views
from tvis.agent.dispatch import rpc
from tvis.agent.lookups import Lookups
from tvis.agent.protocol import BAD_REQUEST, MAX_READ, NOT_FOUND, AgentError, RawBytes
from tvis.store.chunks import LazyArray

# A raw array reply stays well under the 64 MiB frame limit with its record around it.
MAX_ARRAY_BYTES = 48 << 20


class TensorsAPI:
    """``tensor``, ``view``, ``image``, ``array``, ``read`` and ``param`` over the runs
    ``lookups`` reads."""

    def __init__(self, lookups: Lookups) -> None:
        self.lookups = lookups
        self.store = lookups.store

    @rpc
    def tensor(
        self, run: str, tensor: int, batch: int | None = None, step: int | None = None
    ) -> dict[str, Any]:
        """A tensor entry (stats, histogram, value layout), its gradient's entry inlined."""
        chunk = self.lookups.chunk(run, batch, step)
        entry = dict(chunk.tensor(tensor))
        if entry.get("grad") is not None:
            entry["grad_entry"] = chunk.tensors.get(entry["grad"])
        return entry

    @rpc
    def view(
        self,
        run: str,
        tensor: int,
        batch: int | None = None,
        step: int | None = None,
        grad: bool = False,
        sample: int | None = None,
        index: list[int] | None = None,
        window: list[int] | None = None,
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """A 2-D window of a tensor (or its gradient) for one sample, block-mean downsampled."""
        chunk = self.lookups.chunk(run, batch, step)
        entry = self.lookups.entry(chunk, tensor, grad)
        values = self.lookups.values(chunk, entry)
        result = views.heatmap(
            values,
            batch_dim=entry.get("batch_dim"),
            sample=sample,
            index=index or [],
            window=window,
            width=width,
            height=height,
        )
        result.update(tensor=entry["id"], kept=(entry.get("value") or {}).get("kept", "all"))
        return result

    @rpc
    def image(
        self,
        run: str,
        batch: int,
        tensor: int,
        sample: int = 0,
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """One sample of an image tensor as uint8 pixels, un-normalized with the recorded
        mean/std and shrunk to fit ``width`` × ``height``."""
        chunk = self.store.chunk(run, "batch", batch)
        entry = chunk.tensor(tensor)
        values = self.lookups.values(chunk, entry)
        batch_dim = entry.get("batch_dim")
        if batch_dim is None and values.ndim == 4:
            batch_dim = 0  # an NCHW batch whose batch dim the recorder could not name
        one = views.take_sample(values, batch_dim, sample)
        return views.picture(one, self.lookups.normalize(run), width, height)

    @rpc
    def array(
        self,
        run: str,
        tensor: int,
        batch: int | None = None,
        step: int | None = None,
        grad: bool = False,
        max_elems: int = 65536,
        start: int = 0,
    ) -> dict[str, Any]:
        """A tensor's stored values from row ``start``, at most ``max_elems`` of them (and
        at most 48 MiB); page through a big tensor with ``next``."""
        chunk = self.lookups.chunk(run, batch, step)
        entry = self.lookups.entry(chunk, tensor, grad)
        values = self.lookups.values(chunk, entry)
        cap = max(MAX_ARRAY_BYTES // max(values.itemsize, 1), 1)
        result = views.bounded(values, min(max_elems, cap), start)
        result.update(shape=list(values.shape), kept=(entry.get("value") or {}).get("kept", "all"))
        return result

    @rpc
    def read(
        self,
        run: str,
        tensor: int,
        batch: int | None = None,
        step: int | None = None,
        grad: bool = False,
        offset: int = 0,
        length: int = MAX_READ,
    ) -> RawBytes:
        """Bytes ``offset`` to ``offset + length`` (at most 16 MiB) of a tensor's stored
        values, C order, little-endian, as a data frame; the layout is the entry's
        ``value`` (dtype, shape, nbytes). Clients ask for several ranges at once."""
        chunk = self.lookups.chunk(run, batch, step)
        entry = self.lookups.entry(chunk, tensor, grad)
        values = self.lookups.values(chunk, entry)
        if offset < 0 or length < 0 or length > MAX_READ:
            raise AgentError(f"read needs offset >= 0 and 0 <= length <= {MAX_READ}.", BAD_REQUEST)
        if offset > values.nbytes:
            raise AgentError(
                f"offset {offset} is past the {values.nbytes} bytes of tensor {entry['id']}.",
                BAD_REQUEST,
            )
        if isinstance(values, LazyArray):  # make only the elements of this range
            return RawBytes(values.byte_range(offset, length).data)
        # (a uint8 view, not memoryview.cast: that refuses 0-d arrays and unusual dtypes)
        data = values.reshape(-1).view(np.uint8).data
        return RawBytes(data[offset : offset + length])

    @rpc
    def param(
        self,
        run: str,
        step: int,
        name: str,
        which: str = "weight",
        index: list[int] | None = None,
        window: list[int] | None = None,
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """Like ``view``, for a parameter's weight, gradient or update at a step."""
        if which not in ("weight", "grad", "update"):
            raise AgentError("which must be 'weight', 'grad' or 'update'.", BAD_REQUEST)
        chunk = self.store.chunk(run, "step", step)
        record = next((p for p in chunk.record.get("params") or [] if p.get("name") == name), None)
        if record is None:
            raise AgentError(f"step {step} has no parameter {name!r}.", NOT_FOUND)
        tensor = record.get(which)
        if not isinstance(tensor, int):
            raise AgentError(
                f"parameter {name!r} has no recorded {which} at step {step}.", NOT_FOUND
            )
        result = self.view(
            run, tensor, step=step, index=index, window=window, width=width, height=height
        )
        result.update(name=name, which=which)
        return result
