"""One batch being recorded: its calls, its tensor table and the values it keeps."""

from __future__ import annotations

import time
import weakref
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from tvis.record import anomalies, sample_cap, tensors
from tvis.store import schema
from tvis.store.rounding import MANTISSA_BITS

# A call that returns more tensors than this (a list of 500 feature maps, a dict of every
# hidden state) keeps the first ones: the inspector shows a card per tensor and nobody
# reads 500 cards.
MAX_ARGS = 16

# Recorded calls per batch past which project helpers (functions, transforms, tokenizer
# calls) are counted rather than recorded: one called in a Python loop could otherwise
# produce millions of records. Modules and the loss are always recorded.
CALL_CAP = 20000

# Calls of one module recorded per training batch: other modules and the loss are always
# recorded, but a cell called for each step of a very long sequence would otherwise grow
# the batch without bound.
MODULE_REPEATS = 20000

# A light group (evaluation forwards, extra LBFGS passes) keeps at most this many calls:
# enough to show the shape of an eval loop, bounded however long it runs.
LIGHT_CALL_CAP = 500

# Root forwards made from one line of code that a light group records in full: later
# ones from that line (the rest of a generate() loop, an LBFGS closure's extra passes)
# are counted, and run with tvis out of the way until they return.
LIGHT_REPEATS = 3

# Text kept of a non-tensor argument: enough for a shape tuple, a flag or a short string.
REPR_CHARS = 80

# A raw text sample (what a tokenizer was given) is kept whole up to this many characters.
TEXT_CHARS = 4000
# Token ids kept from a list argument: as many tokens as a long text shown in a pane.
MAX_IDS = 4096

# Pictures kept per dataset item (raw image and each transform stage's output): a
# multi-crop pipeline making dozens of views per item would otherwise fill the batch.
IMAGES_PER_ITEM = 16

# CPU tensors of at least DEFER_MIN elements get their statistics on the writer thread,
# up to DEFER_BYTES of private copies per batch (past that, on the spot). The copies live
# until the writer reaches their batch, with up to QUEUE_DEPTH batches queued: at 64 MB
# they were most of what a recorded run added to the peak memory (char_gpt 1.37x plain,
# 1.14x at 16 MB).
DEFER_MIN = 1 << 15
DEFER_BYTES = 1 << 24


@dataclass
class Settings:
    """What the user asked `tvis run` to record."""

    steps: int = 3
    samples: int = 3
    max_elems: int = 2_000_000
    max_batches: int = 64
    max_bytes: int = 512 * 2**20
    param_elems: int = 2_000_000  # parameter elements kept with exact values, per step
    # Activations and gradients are stored to this many mantissa bits; None (--exact): whole.
    mantissa_bits: int | None = MANTISSA_BITS
    functions: bool = True
    ops: bool = True
    gradcam: bool = True
    attention: bool = True  # recompute fused attention weights (tvis/record/attention.py)
    keep_values: bool = True  # False on ranks recorded light: statistics only
    rank_digests: bool = False  # under a launcher: digest each batch to compare ranks
    call_cap: int = CALL_CAP
    module_repeats: int = MODULE_REPEATS

    def light(self) -> Settings:
        """What a rank not recorded in full keeps: every call's statistics, the loss, and
        parameter norms and digests, but no values, no function tracing, no line ops and
        no Grad-CAM (the cost of comparing ranks, not of debugging one)."""
        return replace(
            self, samples=0, functions=False, ops=False, gradcam=False, keep_values=False
        )


@dataclass
class Call:
    """An open or finished call inside a batch (serialised by ``record``)."""

    id: int
    parent: int
    depth: int
    kind: str
    name: str
    cls: str | None
    phase: str
    definition: list | None
    site: list | None
    t0: float
    no_grad: bool
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    fwd_ms: float | None = None
    bwd_ms: float | None = None
    flags: list = field(default_factory=list)
    frame: Any = None  # the project frame executing this call (per-line attribution)
    project: bool = False
    owner: int = -1  # index of the batch this call is recorded in
    cuda_events: Any = None  # (start, end) events for calls that run on a GPU
    line_key: tuple | None = None  # (file, line) of the project line that made this call
    given: list | None = None  # a project function's (name, value) arguments, while open

    def record(self) -> dict:
        return {
            "id": self.id,
            "parent": self.parent,
            "depth": self.depth,
            "kind": self.kind,
            "name": self.name,
            "cls": self.cls,
            "phase": self.phase,
            "def": self.definition,
            "site": self.site,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "t0": self.t0,
            "fwd_ms": self.fwd_ms,
            "bwd_ms": self.bwd_ms,
            "no_grad": self.no_grad,
            "flags": self.flags,
        }


class BatchBuilder:
    """Accumulates one batch (or one light group of no-grad forwards)."""

    def __init__(self, index: int, settings: Settings, light: bool = False) -> None:
        self.index = index
        self.settings = settings
        self.light = light
        self.mode: str | None = "light" if light else None  # "train" | "light" once known
        self.calls: list[Call] = []
        self.entries: list[dict] = []
        self.arrays: dict[int, np.ndarray] = {}
        self.lines: dict[tuple, dict] = {}
        self._by_identity: dict[tuple[int, int], int] = {}
        # The tensors captured, by entry id: held while a training batch is open (Grad-CAM
        # and gradient hooks use them; autograd holds them anyway); held weakly by a light
        # group, whose evaluation outputs would otherwise all stay alive until it closes.
        self.objects: dict[int, torch.Tensor] | weakref.WeakValueDictionary = (
            weakref.WeakValueDictionary() if light else {}
        )
        self.grad_handles: list = []
        self.hooked: set[int] = set()
        # Gradients that arrived outside a backward tvis saw: the script's own
        # torch.autograd.grad (a gradient penalty). A backward that follows replaces them.
        self.outside_grads: set[int] = set()
        self.grad_arrivals: list[tuple[float, int]] = []
        # For the first non-finite value (tvis/record/anomalies.py): an order of events,
        # the sums of project-line results, and when each module call returned.
        self.seq = 0
        self.finite_checks: list = []
        self.exit_seq: dict[int, int] = {}
        self.line_inputs: list = []  # (seq, line, op, call id, activation entry ids)
        self.started = time.perf_counter()
        self.phase_ms: dict[str, float] = {}
        self.batch_size: int | None = None
        # A sequence-first batch (tvis/record/seq_first.py): its time steps, and the shape
        # of the model's input the batch size was first taken from.
        self.seq_len: int | None = None
        self.input_shape: tuple[int, ...] | None = None
        self.had_data = False
        self.root_forwards = 0
        self.had_backward = False
        self.loss: float | None = None
        self.grad_scale: float | None = None  # a GradScaler's factor on backward's loss
        self.digest: str | None = None  # of the collated batch, when ranks are compared
        self.step: int | None = None
        self.micro = 0
        self.sections: dict[str, Any] = {}
        # Scalars that may become the loss, by id: (tensor, what made it) (backward_loss.py);
        # and the result of the loss analysed in sections["loss"].
        self.scalars: dict[int, tuple] = {}
        self.loss_tensor: torch.Tensor | None = None
        # Its positions not ignored (``target != ignore_index``), flat, sample by sample.
        self.loss_valid: torch.Tensor | None = None
        # Root module calls as they were made, and the autograd nodes of BatchNorm calls
        # (holding the batch's statistics), for Grad-CAM's replay (gradcam_replay.py).
        self.root_runs: list = []
        self.norm_nodes: dict[int, Any] = {}
        self.dropped_calls = 0
        # Calls left out past the cap: (name, cls, id of the recorded call they ran in) -> n
        self.dropped_sites: Counter[tuple[str, str | None, int]] = Counter()
        # A light group's root forwards per (module name, calling line), and the repeats
        # counted rather than recorded, per (name, cls, id of the call they ran in).
        self.root_repeats: Counter[tuple[str, tuple | None]] = Counter()
        self.repeat_sites: Counter[tuple[str, str | None, int]] = Counter()
        self.module_calls: Counter[str] = Counter()  # calls per module name (module_repeats)
        self.failures: Counter[str] = Counter()  # why tensors could not be read -> how many
        self.raw_images = 0
        self.kept_bytes = 0
        # (entry, private copy) pairs whose statistics the writer thread computes.
        self.pending: list[tuple[dict, torch.Tensor]] = []
        self.pending_bytes = 0
        self.bytes_left = settings.max_bytes  # set by the session from the run's budget
        self.samples = settings.samples  # lowered by the session as the budget runs out
        # Bytes one sample of the values kept so far takes; the samples kept when they
        # came to more than a batch may hold (sample_cap.py), else None.
        self.sample_bytes = 0.0
        self.samples_capped: int | None = None
        # Position within the batch of the dataset item being fetched (None outside a
        # fetch): per-item values are kept for the first ``samples`` items only.
        self.item: int | None = None

    # -- tensors -----------------------------------------------------------------------

    def tensor(self, t: torch.Tensor, keep_values: bool = True) -> int:
        """The entry id of ``t`` in this batch, capturing it on first sight."""
        key = _identity(t)
        found = self._by_identity.get(key)
        if found is not None and self.objects.get(found) is t:
            return found
        entry_id = len(self.entries)
        if not self.keeps_item():
            # Items past the kept samples: the call tree shows their shapes; statistics of
            # each item would cost more than the pipeline itself, and the collated batch
            # has whole-batch statistics anyway.
            entry = {"id": entry_id, **tensors.describe(t), "grad": None, "of": None}
            entry.update(stats={"numel": t.numel()}, hist=None, value=None, batch_dim=None)
            entry["batch_dim_inferred"] = False
        else:
            entry = self._capture(t, entry_id, keep_values and not self.light)
        # Registered only once its entry exists: an id never points at another's values.
        self.entries.append(entry)
        self._by_identity[key] = entry_id
        self.objects[entry_id] = t
        self._cap_samples(entry)
        return entry_id

    def _capture(self, t: torch.Tensor, entry_id: int, keep_values: bool) -> dict:
        """The entry of ``t``: summarised, or marked ``not_captured`` with the reason."""
        reason = tensors.not_captured(t)
        if reason is None:
            try:
                return self._summarize(t, entry_id, keep_values)
            except Exception as e:
                self.arrays.pop(entry_id, None)
                reason = f"unreadable ({type(e).__name__})"
                self.failures[f"{type(e).__name__}: {first_line(e)}"] += 1
        entry = {"id": entry_id, **tensors.describe(t), "grad": None, "of": None}
        entry.update(stats=_numel(t), hist=None, value=None, batch_dim=None, not_captured=reason)
        entry["batch_dim_inferred"] = False
        return entry

    def entry_of(self, t: torch.Tensor) -> int | None:
        """The entry id of ``t`` if this batch captured it as it is now."""
        return self._by_identity.get(_identity(t))

    def keeps_item(self) -> bool:
        """Whether values seen now belong to a kept sample (always, outside a fetch)."""
        return self.item is None or self.item < self.samples

    def derived(self, t: torch.Tensor, max_elems: int | None = None, summarize: bool = True) -> int:
        """A small array tvis computed (per-sample loss, p(target), a Grad-CAM map): kept
        whole up to --max-elems (or ``max_elems``), whatever the sample limit. Without
        ``summarize``, no statistics or histogram (arrays only a view reads, many per batch)."""
        entry_id = len(self.entries)
        entry = {"id": entry_id, **tensors.describe(t), "grad": None, "of": None, "derived": True}
        if summarize:
            self._statistics(t, entry)
        else:
            entry["stats"], entry["hist"] = {"numel": t.numel()}, None
        entry["batch_dim"], entry["batch_dim_inferred"] = None, False
        entry["value"] = None
        if not self.settings.keep_values:
            self.entries.append(entry)
            return entry_id
        left = self.bytes_left - self.kept_bytes
        cap = self.settings.max_elems if max_elems is None else max_elems
        values, how = tensors.keep(t, None, 0, cap, max_bytes=left)
        if values is not None:
            entry["value"] = how
            self.arrays[entry_id] = values
            self.kept_bytes += values.nbytes
        self.entries.append(entry)
        return entry_id

    def image(self, picture) -> int | None:
        """A raw PIL image from the data pipeline, kept for the first samples only (inside
        a fetch: every picture of the first items, up to IMAGES_PER_ITEM each)."""
        if self.item is None:
            if self.raw_images >= self.settings.samples:
                return None
        elif not self.keeps_item() or self.raw_images >= self.samples * IMAGES_PER_ITEM:
            return None
        self.raw_images += 1
        array = np.asarray(picture.convert("RGB") if picture.mode not in ("L", "RGB") else picture)
        entry_id = len(self.entries)
        self.entries.append(
            {
                "id": entry_id,
                "shape": list(array.shape),
                "dtype": "uint8",
                "device": "cpu",
                "requires_grad": False,
                "grad": None,
                "of": None,
                "raw_image": picture.mode,
                "stats": {"numel": int(array.size)},
                "hist": None,
                "value": {"kept": "all"},
                "batch_dim": None,
                "batch_dim_inferred": False,
            }
        )
        self.arrays[entry_id] = np.ascontiguousarray(array, dtype=np.uint8)
        return entry_id

    def gradient(self, of: int, g: torch.Tensor) -> int:
        entry_id = len(self.entries)
        entry = self._capture(g, entry_id, not self.light)
        entry["of"] = of
        self.entries.append(entry)
        self.entries[of]["grad"] = entry_id
        self._cap_samples(entry)
        return entry_id

    def _cap_samples(self, entry: dict) -> None:
        """Keep fewer samples from the moment the batch's kept samples pass what a batch
        may hold (sample_cap.py), cutting what it kept so far: a big model's batch never
        holds the values of all ``--samples`` samples at once, only to cut them at its end."""
        array = self.arrays.get(entry["id"])
        if array is None:
            return
        self.sample_bytes += sample_cap.sample_bytes(entry, array)
        keep = sample_cap.samples_within(self.sample_bytes, self.samples)
        if keep < self.samples:
            self.kept_bytes -= sample_cap.cut(self.entries, self.arrays, keep)
            self.samples = self.samples_capped = keep

    def _summarize(self, t: torch.Tensor, entry_id: int, keep_values: bool) -> dict:
        entry = {"id": entry_id, **tensors.describe(t), "grad": None, "of": None}
        self._statistics(t, entry)
        dim, span, inferred = self.batch_dim(t)
        entry["batch_dim"], entry["batch_dim_inferred"] = dim, inferred
        if span > 1:
            entry["batch_span"] = span
        entry["value"] = None
        if keep_values and self.samples:
            self._keep(t, entry, dim, span)
        return entry

    def _keep(self, t: torch.Tensor, entry: dict, dim: int | None, span: int) -> None:
        """Store the kept samples of ``t``. Time-major rows of a sequence-first batch
        (row ``t*B + b``) are gathered per sample first, so that each kept sample's ``span``
        rows lie together as the viewer reads a merged ``[B*T, ...]`` tensor."""
        left = self.bytes_left - self.kept_bytes
        part, cut = t, None
        if dim == 0 and span > 1 and span == self.seq_len and t.shape[0] == span * self.batch_size:
            cut = min(self.samples, self.batch_size)
            # Row t*B + b of sample b, step t: only the kept samples' rows are copied.
            rows = torch.arange(cut)[:, None] + torch.arange(span)[None, :] * self.batch_size
            part = t.detach().index_select(0, rows.reshape(-1).to(t.device))
            entry["time_major"] = True  # stored rows: sample by sample, not as recorded
        values, how = tensors.keep(part, dim, self.samples, self.settings.max_elems, span, left)
        if values is not None:
            if cut is not None and cut < self.batch_size:
                how["count"] = cut
            self.arrays[entry["id"]] = values
            entry["value"] = how
            self.kept_bytes += values.nbytes

    def rebatch(self, size: int) -> None:
        """The batch holds ``size`` samples, not what dim 0 of the model's input said:
        name again the batch dim of every tensor captured so far, and keep its samples
        again (statistics were of the whole tensor and stay)."""
        self.batch_size = size
        for entry_id, t in list(self.objects.items()):
            entry = self.entries[entry_id]
            if entry.get("derived") or "not_captured" in entry or "stats" not in entry:
                continue
            dim, span, inferred = self.batch_dim(t)
            entry["batch_dim"], entry["batch_dim_inferred"] = dim, inferred
            entry.pop("batch_span", None)
            entry.pop("time_major", None)
            if span > 1:
                entry["batch_span"] = span
            old = self.arrays.pop(entry_id, None)
            if old is None:
                continue
            self.kept_bytes -= old.nbytes
            entry["value"] = None
            self._keep(t, entry, dim, span)
        self.sample_bytes = sum(
            sample_cap.sample_bytes(e, self.arrays[e["id"]])
            for e in self.entries
            if e["id"] in self.arrays
        )

    def _statistics(self, t: torch.Tensor, entry: dict) -> None:
        """Statistics of ``t`` into ``entry`` now, or a private copy queued for the writer
        thread: for a large CPU tensor one copy costs the training thread a fraction of the
        passes statistics take, and a copy is safe from later in-place changes."""
        n = t.numel()
        nbytes = n * t.element_size()
        if (
            n >= DEFER_MIN
            and t.device.type == "cpu"
            and t.layout == torch.strided
            and 0 not in t.stride()  # expanded: its storage alone is read, on the spot
            and self.pending_bytes + nbytes <= DEFER_BYTES
        ):
            self.pending.append((entry, tensors.private_copy(t)))
            self.pending_bytes += nbytes
            entry["stats"], entry["hist"] = {"numel": n}, None
        else:
            entry["stats"], entry["hist"] = tensors.stats(t)

    def hold_weakly(self) -> weakref.WeakValueDictionary | None:
        """A backward begins: the captured tensors are held weakly until it ends, so each
        goes as soon as autograd has used it, as it would untraced (held to the end, the
        batch's activations all outlived the backward: ResNet-18 peaked up to 300 MB
        higher). What the backward frees nobody can capture or hook again. Returns the
        strong holding that ``hold_strongly`` puts back, None for a light group."""
        if self.light:
            return None
        self.objects = weakref.WeakValueDictionary(self.objects)
        return self.objects

    def hold_strongly(self, weak: weakref.WeakValueDictionary | None) -> None:
        """The backward ended: tensors captured from now on are held to the batch's end."""
        if weak is not None and self.objects is weak:
            self.objects = dict(weak.items())

    def forget_outside_grads(self) -> None:
        """A backward begins: gradients taken by the script's own ``autograd.grad`` were
        not dL/d(activation) of the loss; its backward's are (or none, for an output it
        does not reach)."""
        if not self.outside_grads:
            return
        for entry_id in self.outside_grads:
            self.entries[entry_id]["grad"] = None
        self.grad_arrivals = [a for a in self.grad_arrivals if a[1] not in self.outside_grads]
        self.outside_grads.clear()

    def take_pending(self) -> list[tuple[dict, torch.Tensor]]:
        """The private copies queued so far (their bytes still count toward the cap)."""
        pending, self.pending = self.pending, []
        return pending

    def relabel_batch_dims(self) -> None:
        """Give tensors captured before the batch size was known their batch dim."""
        for entry_id, t in self.objects.items():
            entry = self.entries[entry_id]
            skip = entry.get("derived") or "not_captured" in entry
            if entry.get("batch_dim") is None and not skip:
                dim, span, inferred = self.batch_dim(t)
                entry["batch_dim"], entry["batch_dim_inferred"] = dim, inferred
                if span > 1:
                    entry["batch_span"] = span

    def batch_dim(self, t: torch.Tensor) -> tuple[int | None, int, bool]:
        """Which dim of ``t`` indexes samples: (dim, rows per sample, inferred?)."""
        b = self.batch_size
        if not b or t.dim() == 0:
            return None, 1, False
        steps = self.seq_len
        if steps is not None and t.dim() >= 2 and t.shape[:2] == (steps, b):
            return 1, 1, False  # sequence-first [T, B, ...], known from the model
        if t.shape[0] == b:
            return 0, 1, False
        if t.dim() >= 2 and t.shape[1] == b:
            return 1, 1, True  # sequence-first [T, B, ...]
        if b > 1 and t.shape[0] % b == 0 and t.dim() >= 2:
            return 0, t.shape[0] // b, True  # merged [B*T, ...]
        return None, 1, False

    # -- calls -------------------------------------------------------------------------

    @property
    def full(self) -> bool:
        """Past the call cap: a light group records nothing more; a training batch
        records its modules and loss, and only counts project helpers."""
        return len(self.calls) >= (LIGHT_CALL_CAP if self.light else self.settings.call_cap)

    def add_call(self, call: Call) -> Call:
        self.calls.append(call)
        return call

    def args(self, named: list[tuple[str, Any]], keep_values: bool = True) -> list[dict]:
        """Flatten named values into arg records (tensors captured, others as short text)."""
        out: list[dict] = []
        for name, value in named:
            _flatten(name, value, out, self, keep_values)
            if len(out) >= MAX_ARGS:
                break
        return out[:MAX_ARGS]

    # -- serialisation -----------------------------------------------------------------

    def release(self) -> None:
        for handle in self.grad_handles:
            handle.remove()
        self.grad_handles.clear()
        self.objects.clear()
        self._by_identity.clear()
        self.scalars.clear()
        self.root_runs.clear()
        self.norm_nodes.clear()
        self.loss_tensor = None
        self.loss_valid = None
        for call in self.calls:
            call.frame = None

    def _dropped(self) -> dict:
        """What the call cap left out, and the repeated forwards a light group counted
        (``why: "repeat"``, with how many of them were recorded), per name and the call
        they ran in: the tree shows "×N more" there."""
        if not self.dropped_sites and not self.repeat_sites:
            return {}
        sites = [
            {"name": name, "cls": cls, "parent": parent, "count": n}
            for (name, cls, parent), n in self.dropped_sites.most_common()
        ]
        sites += [
            {
                "name": name,
                "cls": cls,
                "parent": parent,
                "count": n,
                "why": "repeat",
                "recorded": LIGHT_REPEATS,
            }
            for (name, cls, parent), n in self.repeat_sites.most_common()
        ]
        return {"dropped_sites": sites}

    def record(self) -> dict:
        return {
            "batch": {
                "index": self.index,
                "step": self.step,
                "micro": self.micro,
                "loss": self.loss,
                "no_grad": self.mode == "light" and not self.had_backward,
                "light": self.light,
                "batch_size": self.batch_size,
                "phase_ms": self.phase_ms,
                "n_calls": len(self.calls),
                "dropped_calls": self.dropped_calls,
                **({"repeats": n} if (n := sum(self.repeat_sites.values())) else {}),
                **({"digest": self.digest} if self.digest else {}),
                **({"grad_scale": self.grad_scale} if self.grad_scale else {}),
            },
            "calls": [c.record() for c in self.calls],
            "tensors": self.entries,
            "lines": list(self.lines.values()),
            **self._dropped(),
            **self.sections,
        }


def _numel(t: torch.Tensor) -> dict:
    try:
        return {"numel": int(t.numel())}
    except RuntimeError:
        return {}


def first_line(error: BaseException, limit: int = 160) -> str:
    """An exception's message as one line: torch's dispatcher errors append a list of
    every backend (dozens of lines) that no reader wants in a notice."""
    lines = str(error).strip().splitlines()
    text = lines[0].strip() if lines else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _identity(t: torch.Tensor) -> tuple[int, int]:
    """A tensor as it is now: the same object changed in place is another value. Tensors
    made under ``torch.inference_mode()`` keep no version counter (and cannot be changed in
    place outside it): their object alone."""
    return (id(t), 0 if t.is_inference() else t._version)


def settle(record: dict, pending: list) -> int:
    """Finish a batch record on the writer thread: the statistics put off, then the marks
    that read statistics (non-finite or mostly-zero outputs, the first non-finite value:
    ``record["anomalies"]``). Returns how many failed."""
    failed = tensors.fill(pending)
    checks, exits, arrivals, line_inputs = record.pop(ANOMALY_INPUTS, ([], {}, [], []))
    entries = record["tensors"]
    for call in record["calls"]:
        if call["kind"] == "function":
            continue
        for arg in call["outputs"]:
            if "tensor" in arg:
                flags = schema.stat_flags(entries[arg["tensor"]]["stats"])
                call["flags"].extend(f for f in flags if f not in call["flags"])
    try:
        found = anomalies.locate(record, checks, exits, arrivals, line_inputs)
    except Exception:
        found, failed = {}, failed + 1
    if found:
        record["anomalies"] = found
    return failed


# Key under which the recorder hands the writer thread what ``anomalies.locate`` reads;
# taken out of the record before it is written.
ANOMALY_INPUTS = "_anomaly_inputs"


def _flatten(name: str, value: Any, out: list, batch: BatchBuilder, keep: bool) -> None:
    if len(out) >= MAX_ARGS:
        return
    if isinstance(value, torch.Tensor):
        out.append({"name": name, "tensor": batch.tensor(value, keep)})
    elif isinstance(value, str):
        out.append({"name": name, "text": value[:TEXT_CHARS]})
    elif type(value).__module__.startswith("PIL.") and hasattr(value, "getbands"):
        image = batch.image(value) if keep else None
        out.append(
            {"name": name, "image": image}
            if image is not None
            else {"name": name, "repr": short_repr(value)}
        )
    elif isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        for i, v in enumerate(value):
            _flatten(f"{name}[{i}]", v, out, batch, keep)
    elif isinstance(value, dict) and any(isinstance(v, torch.Tensor) for v in value.values()):
        for k, v in value.items():
            _flatten(f"{name}.{k}", v, out, batch, keep)
    elif hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        for k in value.__dataclass_fields__:
            _flatten(f"{name}.{k}", getattr(value, k, None), out, batch, keep)
    elif _token_ids(value):
        # Token ids a project tokenizer returned: kept so the viewer can show them as text.
        out.append({"name": name, "repr": short_repr(value), "ids": list(value[:MAX_IDS])})
    elif value is not None:
        out.append({"name": name, "repr": short_repr(value)})


def _token_ids(value: Any) -> bool:
    """A plain list or tuple of ints (not bools), the way a hand-written tokenizer returns ids."""
    return (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(type(v) is int for v in value[:MAX_IDS])
    )


def short_repr(value: Any) -> str:
    """Bounded text for a non-tensor value; never calls a tensor's repr."""
    try:
        if isinstance(value, (int, float, bool, str, torch.dtype, torch.device, torch.Size)):
            text = repr(value)
        elif isinstance(value, (list, tuple)) and len(value) <= 8:
            text = (
                repr(value)
                if all(isinstance(v, (int, float, bool, str)) for v in value)
                else (f"{type(value).__name__}[{len(value)}]")
            )
        elif isinstance(value, np.ndarray):
            text = f"ndarray{list(value.shape)} {value.dtype}"
        else:
            text = f"<{type(value).__name__}>"
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 1] + "…"
