"""The recording session: PyTorch's hooks in, batches and steps out.

A batch is forward + loss + backward; a step is one ``optimizer.step()`` (several
batches with gradient accumulation; each backward when the script has no optimizer).
No-grad forwards outside a training batch (evaluation, sampling) and the extra passes of
an LBFGS closure are recorded light, grouped into one batch folder, and never count
toward ``--max-batches``.

Every hook body is guarded: a failure inside tvis becomes a notice, never an exception
in the training script. The only exception tvis raises on purpose is ``StopRecording``.
"""

from __future__ import annotations

import gc
import inspect
import sys
import threading
import time
import traceback
from collections import Counter
from functools import partial
from typing import Any

import torch

from tvis.record import cuda_timing
from tvis.record import params as param_records
from tvis.record.builder import BatchBuilder, Call, Settings
from tvis.record.data import note_normalize
from tvis.record.patches import Patches
from tvis.record.project import Project
from tvis.record.writer_thread import BackgroundWriter

_perf = time.perf_counter


class StopRecording(BaseException):
    """Raised into the script once enough steps are recorded (not an ``Exception``, so
    ordinary ``except Exception`` blocks let it through)."""


# How many times the script may swallow StopRecording (a bare ``except:``) before tvis
# ends the process itself: the run is saved at the first stop, so nothing is lost.
SWALLOW_LIMIT = 3


# Root forwards that share a batch before a backward (siamese and contrastive setups run
# two or three); a script with many more never calls backward, and each group of this
# many becomes a batch so --max-batches can end it.
FORWARDS_WITHOUT_BACKWARD = 16


# Share of --max-bytes for tensor values; the rest is for the records (call trees,
# statistics, histograms), which are a few percent of a run.
VALUES_SHARE = 0.9

# Fractions of --max-bytes left at which a new batch keeps one sample, then none.
BUDGET_ONE_SAMPLE = 0.5
BUDGET_STATS_ONLY = 0.1


class _Work:
    """Brackets tvis's own work: its duration is overhead, and torch ops inside it are
    not the user's (``busy``). Only the outermost bracket counts, so nesting is free."""

    __slots__ = ("recorder", "started")

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.started = 0.0

    def __enter__(self) -> None:
        rec = self.recorder
        if not rec.busy:
            self.started = _perf()
        rec.busy += 1

    def __exit__(self, *exc) -> None:
        rec = self.recorder
        rec.busy -= 1
        if not rec.busy:
            rec.overhead += _perf() - self.started


class Recorder:
    """Installs tvis into torch for one run and turns what it sees into batches."""

    def __init__(
        self,
        settings: Settings,
        writer: BackgroundWriter,
        project: Project,
        main_globals: dict | None = None,
    ) -> None:
        self.settings = settings
        self.writer = writer
        self.project = project
        self.main_globals = main_globals or {}
        self.thread = threading.get_ident()
        self.patches = Patches()
        self.handles: list = []
        self.notices: list[dict] = []
        self._notice_keys: set[str] = set()
        self.overhead = 0.0
        self.busy = 0
        self.work = _Work(self)
        self._step_snapshot = None
        self._step_started = 0.0
        self.stack: list[Call] = []
        self.batch: BatchBuilder | None = None
        self.light_group: BatchBuilder | None = None
        self.next_index = 0
        self.train_batches = 0
        self.batch_maps: list[dict] = []
        self.step_maps: list[dict] = []
        self.param_table: dict[str, dict] = {}
        self.optimizers: dict[int, int] = {}  # id(optimizer) -> index
        self.steps_per_optimizer: dict[int, int] = {}
        self.step_index = 0
        self.in_step = 0
        self.in_backward = 0
        self.in_loss = 0
        self.snapshots: dict | None = None
        self.no_optimizer: bool | None = None
        self.module_names: dict[int, str] = {}
        self.roots: dict[int, torch.nn.Module] = {}
        self.signatures: dict[type, list[str]] = {}
        self.in_data = 0
        self.open_modules = 0  # module calls in progress: 0 means the next one is a root
        self.data_info: dict[str, Any] = {}
        self.stopped = False
        self.stop_due = False  # steps are done; stop at the next hook that may raise
        self.loose_params: list | None = None
        self.swallowed = 0
        self.on_hard_stop = None
        self.paused = False  # set while tvis runs its own autograd passes (Grad-CAM)
        self.extensions: list = []
        self.carried: list[Call] = []
        self.contributors: Counter[str] = Counter()

    # -- lifecycle ---------------------------------------------------------------------

    def install(self) -> None:
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim_module

        self.handles += [
            nn_module.register_module_forward_pre_hook(self._module_pre),
            nn_module.register_module_forward_hook(
                self._module_post, with_kwargs=True, always_call=True
            ),
            optim_module.register_optimizer_step_pre_hook(self._step_pre),
            optim_module.register_optimizer_step_post_hook(self._step_post),
        ]
        original_backward = torch.autograd.backward
        self.patches.set(torch.autograd, "backward", partial(self._backward, original_backward))
        for extension in self.extensions:
            extension.install(self)

    def uninstall(self) -> None:
        for extension in reversed(self.extensions):
            try:
                extension.uninstall(self)
            except Exception as e:  # never leave the rest installed because one failed
                self.notice(f"tvis could not remove its {type(extension).__name__}: {e}")
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.patches.restore()

    def finish(self) -> None:
        """Close what is open and write the run index; safe to call more than once."""
        try:
            self._settle_manual_step()
        except Exception as e:
            self.notice(f"tvis could not record the last manual update: {e}")
        self._close_batch()
        self._flush_light()
        self.write_index()

    # -- notices -----------------------------------------------------------------------

    def notice(self, text: str, level: str = "warn") -> None:
        if text not in self._notice_keys:
            self._notice_keys.add(text)
            self.notices.append({"level": level, "text": text})

    def guard(self, what: str, error: Exception) -> None:
        where = traceback.extract_tb(error.__traceback__)[-1]
        self.notice(
            f"tvis failed while {what} ({type(error).__name__}: {error} at "
            f"{where.filename.rsplit('/', 1)[-1]}:{where.lineno}); training was not affected."
        )

    # -- time --------------------------------------------------------------------------

    def clock(self) -> float:
        """Training time: wall time minus tvis's own work so far."""
        return _perf() - self.overhead

    # -- batches -----------------------------------------------------------------------

    def _new_batch(self, light: bool = False) -> BatchBuilder:
        batch = BatchBuilder(self.next_index, self.settings, light=light)
        self.next_index += 1
        batch.bytes_left = self._bytes_left()
        batch.samples = self._samples_within_budget(batch.bytes_left)
        self._reopen_carried(batch)
        return batch

    def _bytes_left(self) -> int:
        """What --max-bytes still allows (values written, queued, or held by open batches)."""
        held = sum(b.kept_bytes for b in (self.batch, self.light_group) if b is not None)
        return int(self.settings.max_bytes * VALUES_SHARE) - self.writer.bytes_queued - held

    def _samples_within_budget(self, left: int) -> int:
        """Samples kept with values, degrading as the run nears --max-bytes: all the
        asked samples, then one, then statistics only."""
        budget = self.settings.max_bytes
        if left > budget * BUDGET_ONE_SAMPLE:
            return self.settings.samples
        if left > budget * BUDGET_STATS_ONLY:
            self.notice(
                "the run passed half of --max-bytes: later batches keep the values of one "
                "sample (statistics still describe every tensor whole)."
            )
            return 1
        self.notice(
            "the run nearly reached --max-bytes: later batches keep statistics only, no values."
        )
        return 0

    def ensure_batch(self) -> BatchBuilder:
        if self.batch is None:
            self.batch = self._new_batch()
        return self.batch

    def _start_train_batch(self) -> BatchBuilder:
        """A grad-enabled root forward: the current batch, or a new one after a backward."""
        batch = self.batch
        if batch is not None and batch.root_forwards >= FORWARDS_WITHOUT_BACKWARD:
            self.notice(
                f"the script ran {FORWARDS_WITHOUT_BACKWARD} forwards without a backward; "
                "tvis groups them into batches of that many.",
                level="info",
            )
            self._close_batch()
            batch = None
        if batch is not None and (batch.had_backward or batch.mode == "light"):
            if self.in_step and batch.had_backward:
                return self._to_light_group(batch)  # LBFGS: closure passes after the first
            self._close_batch()
            batch = None
        if batch is None:
            if self.train_batches >= self.settings.max_batches:
                self.notice(
                    f"the script ran {self.settings.max_batches} batches without reaching "
                    f"{self.settings.steps} optimizer steps; tvis stopped it (--max-batches)."
                )
                self.stop()
            batch = self.ensure_batch()
        if batch.mode is None:
            batch.mode = "train"
            self.train_batches += 1
            self._flush_light()
            self._settle_manual_step()
            if self.stop_due:
                self.check_stop()
        batch.root_forwards += 1
        return batch

    def _start_light_forward(self) -> BatchBuilder:
        """A no-grad root forward: part of the training batch before its backward (a target
        network), else an evaluation forward recorded light."""
        batch = self.batch
        if batch is not None and batch.mode == "train" and not batch.had_backward:
            return batch
        if batch is not None and batch.mode == "train":
            self._close_batch()
            batch = None
        return self._to_light_group(batch)

    def _to_light_group(self, batch: BatchBuilder | None) -> BatchBuilder:
        if batch is not None and batch.mode == "train":
            self._close_batch()
            batch = None
        group = self.light_group
        if group is None:
            group = self.light_group = self._new_batch(light=True)
            group.step = self.step_index
        if batch is not None and batch is not group:
            # Data fetched for what turned out to be an evaluation batch.
            group.phase_ms["data"] = group.phase_ms.get("data", 0) + batch.phase_ms.get("data", 0)
            batch.release()
        self.batch = group
        return group

    def _close_batch(self) -> None:
        batch, self.batch = self.batch, None
        if batch is None:
            return
        if batch is self.light_group:
            return  # flushed when training resumes or the run ends
        self._carry_open_calls(batch)
        if batch.mode is None and not batch.calls:
            batch.release()
            self.next_index -= 1 if batch.index == self.next_index - 1 else 0
            return
        self._write_batch(batch)

    def _flush_light(self) -> None:
        group, self.light_group = self.light_group, None
        if group is None:
            return
        if self.batch is group:
            self.batch = None
        if group.calls or group.dropped_calls:
            self._write_batch(group)
        else:
            group.release()

    def _write_batch(self, batch: BatchBuilder) -> None:
        try:
            cuda_timing.resolve(batch.calls)
            self._finish_backward_times(batch)
            for extension in self.extensions:
                extension.on_batch_close(self, batch)
            batch.release()
            record = batch.record()
            if batch.step is None and batch.mode == "train":
                record["batch"]["step"] = None
            self.batch_maps.append(record["batch"])
            self._account(record, batch.arrays)
            self.writer.put_batch(batch.index, record, batch.arrays)
            self.write_index()
        except Exception as e:
            self.guard(f"writing batch {batch.index}", e)

    def _carry_open_calls(self, batch: BatchBuilder) -> None:
        """Calls still open at a batch boundary with nothing recorded inside them yet
        (``train_step()`` whose first line fetches the next batch) belong to the next
        batch: they move there when it opens."""
        carried = []
        while self.stack and batch.calls and self.stack[-1] is batch.calls[-1]:
            batch.calls.pop()
            carried.append(self.stack.pop())
        self.carried = carried[::-1]

    def _reopen_carried(self, batch: BatchBuilder) -> None:
        carried, self.carried = self.carried, []
        for call in carried:
            call.inputs = []  # their tensors were captured in the previous batch
            call.flags.append("carried")
            self.open_call(batch, call)

    def _account(self, record: dict, arrays: dict) -> None:
        """Attribute stored bytes to the call that produced them (for `tvis run`'s report)."""
        owner: dict[int, str] = {}
        for call in record["calls"]:
            for arg in call["outputs"] + call["inputs"]:
                if "tensor" in arg:
                    owner.setdefault(arg["tensor"], call["name"])
        for entry in record["tensors"]:
            array = arrays.get(entry["id"])
            if array is None:
                continue
            source = owner.get(entry["id"]) or owner.get(entry.get("of"), "derived views")
            self.contributors[source] += array.nbytes

    # -- data ------------------------------------------------------------------------

    def data_begin(self) -> None:
        """The data pipeline starts producing a batch: it opens the next batch."""
        batch = self.batch
        if batch is not None and (batch.had_backward or batch.mode == "light" or batch.had_data):
            self._close_batch()
        self.ensure_batch()
        self.in_data += 1

    def data_end(self, named: list, seconds: float) -> None:
        """The batch as it left the pipeline (``named``: [(name, value)])."""
        self.in_data = max(0, self.in_data - 1)
        batch = self.ensure_batch()
        batch.had_data = True
        if batch.batch_size is None:
            batch.batch_size = _leading_size(named)
        batch.phase_ms["data"] = batch.phase_ms.get("data", 0) + seconds * 1e3
        batch.sections.setdefault("data", {})["batch"] = batch.args(
            named, keep_values=not batch.light
        )

    # -- modules -----------------------------------------------------------------------

    def module_name(self, module: torch.nn.Module) -> str:
        name = self.module_names.get(id(module))
        if name is None:
            root_name = self._global_name(module) or type(module).__name__
            self.roots[id(module)] = module
            for sub_name, sub in module.named_modules():
                self.module_names.setdefault(id(sub), sub_name or root_name)
            name = self.module_names[id(module)]
        return name

    def _global_name(self, obj: Any) -> str | None:
        for key, value in self.main_globals.items():
            if value is obj and not key.startswith("_"):
                return key
        return None

    def _arg_names(self, module: torch.nn.Module) -> list[str]:
        cls = type(module)
        names = self.signatures.get(cls)
        if names is None:
            try:
                params = list(inspect.signature(module.forward).parameters.values())
                names = [
                    p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
                star = [p.name for p in params if p.kind == p.VAR_POSITIONAL]
                names.append(f"*{star[0]}" if star else "*args")
            except (TypeError, ValueError):
                names = ["*args"]
            self.signatures[cls] = names
        return names

    def _module_pre(self, module: torch.nn.Module, args: tuple) -> None:
        if threading.get_ident() != self.thread or self.paused:
            return
        if self.stopped or self.stop_due:
            self.check_stop()
        with self.work:
            try:
                self._enter_module(module, args)
            except StopRecording:
                raise
            except Exception as e:
                self.guard(f"recording the call of {type(module).__name__}", e)

    def _enter_module(self, module: torch.nn.Module, args: tuple) -> None:
        t0 = self.work.started - self.overhead
        is_loss = isinstance(module, torch.nn.modules.loss._Loss)
        grad = torch.is_grad_enabled()
        if self.open_modules or self.in_data:
            batch = self.ensure_batch()  # a submodule, or a transform inside the data pipeline
        elif is_loss and self.batch is not None:
            batch = self.batch
        elif grad:
            batch = self._start_train_batch()
        else:
            batch = self._start_light_forward()
        if batch.batch_size is None and not is_loss:
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            if first is not None and first.dim() > 0:
                batch.batch_size = int(first.shape[0])
        self.open_modules += 1
        if batch.full:
            batch.dropped_calls += 1
            self.stack.append(None)  # keeps pre/post hooks paired
            return
        cls = type(module)
        if self.in_data:
            note_normalize(self.data_info, module)
        call = Call(
            id=0,
            parent=-1,
            depth=0,
            kind="loss" if is_loss else "module",
            name=self.module_name(module),
            cls=cls.__name__,
            phase="loss" if (is_loss or self.in_loss) else self._phase(),
            definition=self._class_location(cls),
            site=self.call_site(),
            t0=(t0 - batch.started) * 1e3,
            no_grad=not grad,
            project=self.project.is_project_class(cls),
        )
        if is_loss:
            self.in_loss += 1
        call.inputs = batch.args(_name_args(self._arg_names(module), args), not batch.light)
        self.open_call(batch, call)
        batch.had_forward = True
        cuda_timing.start(call, args)

    def open_call(self, batch: BatchBuilder, call: Call) -> None:
        """Add ``call`` to ``batch`` under the innermost open call recorded in the same batch."""
        parent = next(
            (c for c in reversed(self.stack) if c is not None and c.owner == batch.index), None
        )
        call.id = len(batch.calls)
        call.owner = batch.index
        call.parent = parent.id if parent else -1
        call.depth = parent.depth + 1 if parent else 0
        batch.add_call(call)
        self.stack.append(call)

    def _module_post(self, module, args, kwargs, output) -> None:
        if threading.get_ident() != self.thread or self.paused:
            return
        with self.work:
            try:
                self._exit_module(module, kwargs, output)
            except Exception as e:
                self.guard(f"recording the output of {type(module).__name__}", e)

    def _exit_module(self, module, kwargs, output) -> None:
        end = self.work.started - self.overhead
        if not self.stack or not self.open_modules:
            return
        self.open_modules -= 1
        call = self.stack.pop()
        while call is not None and call.kind == "function" and self.stack:
            call = self.stack.pop()  # a function that raised inside this module's forward
        if call is not None and call.kind == "loss":
            self.in_loss = max(0, self.in_loss - 1)
        batch = self.batch
        if call is None or batch is None or call.owner != batch.index:
            return
        call.fwd_ms = (end - batch.started) * 1e3 - call.t0
        cuda_timing.stop(call)
        keep = not batch.light
        if kwargs:
            call.inputs += batch.args(list(kwargs.items()), keep)
        call.outputs = batch.args([("out", output)], keep)
        if call.depth == 0:
            phase = "loss" if call.kind == "loss" else "forward"
            batch.phase_ms[phase] = batch.phase_ms.get(phase, 0) + call.fwd_ms
        self._flag_call(batch, call)
        if keep and torch.is_grad_enabled():
            self.watch_gradients(batch, call)
        for extension in self.extensions:
            extension.on_module_exit(self, batch, call, module, output)

    def _phase(self) -> str:
        if self.in_data:
            return "data"
        if self.in_backward:
            return "backward"
        if self.in_step and not self.open_modules:
            return "optimizer"
        return "forward"

    def _class_location(self, cls: type) -> list | None:
        code = getattr(getattr(cls, "forward", None), "__code__", None)
        return self.project.where(code.co_filename, code.co_firstlineno) if code else None

    def call_site(self, skip: int = 0) -> list | None:
        """The innermost project frame calling into torch (what the user wrote)."""
        frame = sys._getframe(3 + skip)
        while frame is not None:
            rel = self.project.relpath(frame.f_code.co_filename)
            if rel is not None:
                return [rel, frame.f_lineno]
            frame = frame.f_back
        return None

    def _flag_call(self, batch: BatchBuilder, call: Call) -> None:
        for arg in call.outputs:
            entry = batch.entries[arg["tensor"]] if "tensor" in arg else None
            if not entry:
                continue
            s = entry["stats"]
            if s.get("nan") or s.get("inf"):
                call.flags.append("nonfinite")
            if s.get("zeros", 0) > 0.9 and s.get("numel", 0) > 1:
                call.flags.append("dead")
            if entry.get("value") and entry["value"].get("kept") != "all":
                call.flags.append("truncated")
        if call.cls in _MIXING and call.kind == "module":
            call.flags.append("mixes_samples")

    # -- gradients ---------------------------------------------------------------------

    def watch_gradients(self, batch: BatchBuilder, call: Call) -> None:
        """Hook dL/d(output) of ``call``'s outputs (each tensor once per batch)."""
        for arg in call.outputs:
            entry_id = arg.get("tensor")
            if entry_id is None or entry_id in batch.hooked:
                continue
            t = batch.objects[entry_id]
            if t.requires_grad:
                batch.hooked.add(entry_id)
                batch.grad_handles.append(t.register_hook(partial(self._on_grad, batch, entry_id)))

    def _on_grad(self, batch: BatchBuilder, entry_id: int, grad: torch.Tensor) -> None:
        if self.paused:
            return None
        with self.work:
            try:
                at = (self.work.started - self.overhead - batch.started) * 1e3
                batch.grad_arrivals.append((at, entry_id))
                if batch.entries[entry_id].get("grad") is None:
                    batch.gradient(entry_id, grad)
            except Exception as e:
                self.guard("recording a gradient", e)
        return None  # the gradient flows on untouched

    def _finish_backward_times(self, batch: BatchBuilder) -> None:
        """Backward time per call, inferred from when gradients reached its output and
        its input (flagged ``bwd_inferred``: approximate)."""
        arrival = {entry_id: at for at, entry_id in batch.grad_arrivals}
        if not arrival:
            return
        times = sorted(arrival.values())
        for call in batch.calls:
            outs = [arrival[a["tensor"]] for a in call.outputs if a.get("tensor") in arrival]
            if not outs:
                continue
            start = min(outs)
            ins = [arrival[a["tensor"]] for a in call.inputs if a.get("tensor") in arrival]
            later = [at for at in times if at > start]
            end = max(ins) if ins else (later[0] if later else start)
            call.bwd_ms = max(end - start, 0.0)
            call.flags.append("bwd_inferred")

    # -- backward ----------------------------------------------------------------------

    def _backward(self, original, tensors, *args, **kwargs):
        if threading.get_ident() != self.thread or self.paused or self.in_backward:
            return original(tensors, *args, **kwargs)
        if self.stopped or self.stop_due:
            self.check_stop()
        batch = None
        with self.work:
            try:
                batch = self.ensure_batch()
                if batch.mode is None:
                    batch.mode = "train"
                    self.train_batches += 1
                loss = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
                if isinstance(loss, torch.Tensor) and loss.numel() == 1:
                    batch.loss = float(loss.detach())
                for extension in self.extensions:
                    extension.before_backward(self, batch, loss)
            except Exception as e:
                self.guard("preparing for backward", e)
        start = self.clock()
        self.in_backward += 1
        try:
            return original(tensors, *args, **kwargs)
        finally:
            self.in_backward -= 1
            if batch is not None:
                with self.work:
                    ms = (self.work.started - self.overhead - start) * 1e3
                    batch.phase_ms["backward"] = batch.phase_ms.get("backward", 0) + ms
                    batch.had_backward = True
                    self._after_backward(batch)

    def _after_backward(self, batch: BatchBuilder) -> None:
        try:
            if self.no_optimizer is None and not self.optimizers:
                self.no_optimizer = not any(
                    issubclass(type(o), torch.optim.Optimizer) for o in gc.get_objects()
                )
                if self.no_optimizer:
                    self.notice(
                        "the script uses no torch.optim optimizer: each backward counts as "
                        "a step, and Δw is measured at the next forward.",
                        level="info",
                    )
            if self.no_optimizer and not self.in_step:
                if self.loose_params is None:
                    self.loose_params = [] if self.roots else param_records.leaf_parameters()
                params = [p for r in self.roots.values() for p in r.parameters()]
                self.snapshots = param_records.snapshot_tensors(params + self.loose_params)
        except Exception as e:
            self.guard("after backward", e)

    def _settle_manual_step(self) -> None:
        """In no-optimizer mode, the update between a backward and the next forward is
        that step's Δw."""
        snapshots, self.snapshots = self.snapshots, None
        if not snapshots:
            return
        with self.work:
            self._write_step(snapshots, optimizer=None)
        if self.step_index >= self.settings.steps:
            self.stop_due = True

    def function_boundary(self) -> None:
        """A project function called at the top of a batch after its backward starts the
        next batch (training code without nn.Module: a plain ``forward(params, x)``)."""
        batch = self.batch
        if batch is None or not batch.had_backward or self.in_step or self.in_backward:
            return
        if any(c is not None and c.owner == batch.index for c in self.stack):
            return
        self._close_batch()
        self._settle_manual_step()

    # -- optimizer ---------------------------------------------------------------------

    def _step_pre(self, optimizer, args, kwargs) -> None:
        if threading.get_ident() != self.thread or self.paused:
            return
        if self.stopped or self.stop_due:
            self.check_stop()
        self.in_step += 1
        with self.work:
            try:
                self.no_optimizer = False
                self.snapshots = None
                index = self.optimizers.setdefault(id(optimizer), len(self.optimizers))
                self.steps_per_optimizer.setdefault(index, 0)
                self._step_started = self.work.started - self.overhead
                self._step_snapshot = param_records.snapshot_optimizer(optimizer)
            except Exception as e:
                self.guard("preparing for the optimizer step", e)

    def _step_post(self, optimizer, args, kwargs) -> None:
        if threading.get_ident() != self.thread or self.paused:
            return
        self.in_step = max(0, self.in_step - 1)
        snap, self._step_snapshot = self._step_snapshot, None
        index = self.optimizers.setdefault(id(optimizer), len(self.optimizers))
        # Counted before anything that could fail: a broken capture must not stop the stop.
        self.steps_per_optimizer[index] = self.steps_per_optimizer.get(index, 0) + 1
        with self.work:
            try:
                batch = self.batch
                if batch is not None and batch.mode == "train":
                    ms = (self.work.started - self.overhead - self._step_started) * 1e3
                    batch.phase_ms["optimizer"] = batch.phase_ms.get("optimizer", 0) + ms
                self._flush_light()
                if snap is not None:
                    self._write_step(snap, optimizer=(index, optimizer))
            except Exception as e:
                self.guard("recording the optimizer step", e)
        if all(n >= self.settings.steps for n in self.steps_per_optimizer.values()):
            self.stop()

    def _write_step(self, snapshot: dict, optimizer) -> None:
        step = self.step_index
        self.step_index += 1
        earlier = [b for b in self.batch_maps if b.get("step") is None and not b["light"]]
        for micro, b in enumerate(earlier):
            b["step"], b["micro"] = step, micro
        batch_ids = [b["index"] for b in earlier]
        losses = [b["loss"] for b in earlier if b.get("loss") is not None]
        current = self.batch
        if current is not None and current.mode == "train" and current.step is None:
            current.step, current.micro = step, len(earlier)
            batch_ids.append(current.index)
            if current.loss is not None:
                losses.append(current.loss)
        record, arrays = param_records.build_step(
            step,
            snapshot,
            optimizer,
            self._param_names(),
            batch_ids,
            self.settings.max_elems,
            self._bytes_left(),
        )
        record["step"]["loss"] = sum(losses) / len(losses) if losses else None
        for p in record["params"]:
            self.param_table.setdefault(
                p["name"], {k: p[k] for k in ("name", "module", "shape", "dtype")}
            )
        self.step_maps.append(record["step"])
        self.contributors["parameters (weight, grad, Δw)"] += sum(a.nbytes for a in arrays.values())
        self.writer.put_step(step, record, arrays)
        self.write_index()

    def _param_names(self) -> dict[int, tuple[str, str]]:
        names: dict[int, tuple[str, str]] = {}
        for root in self.roots.values():
            for module_name, module in root.named_modules():
                for pname, p in module._parameters.items():
                    if p is not None and id(p) not in names:
                        path = f"{module_name}.{pname}" if module_name else pname
                        names[id(p)] = (path, self.module_names.get(id(module), module_name))
        return names

    # -- stopping ----------------------------------------------------------------------

    def check_stop(self) -> None:
        """Raise StopRecording if the recording is over (called where raising is safe)."""
        if self.stop_due:
            self.stop_due = False
            self.stop()
        if self.stopped:
            self.stop_again()

    def stop(self) -> None:
        self.stopped = True
        raise StopRecording()

    def stop_again(self) -> None:
        self.swallowed += 1
        if self.swallowed == 1:
            self.notice(
                "the script caught tvis's stop signal (a bare `except:` or `except "
                "BaseException`?) and kept going; tvis stopped it again."
            )
        if self.swallowed >= SWALLOW_LIMIT and self.on_hard_stop is not None:
            self.on_hard_stop()
        raise StopRecording()

    # -- index -------------------------------------------------------------------------

    def write_index(self) -> None:
        self.writer.put_index(self.index())

    def index(self) -> dict:
        """The run index as it stands (see tvis/store/format.py)."""
        return {
            "batches": self.batch_maps,
            "steps": self.step_maps,
            "params": list(self.param_table.values()),
            "notices": self.notices,
            "data": self.data_info,
            "project": self.project.root,
            "model": {
                "roots": [self.module_names.get(i) for i in self.roots],
                "params": sum(p.numel() for r in self.roots.values() for p in r.parameters()),
            },
        }


_MIXING = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm2d"}


def _name_args(names: list[str], args: tuple) -> list[tuple[str, Any]]:
    positional = names[:-1]
    star = names[-1]
    named = []
    for i, value in enumerate(args):
        name = (
            positional[i] if i < len(positional) else f"{star.lstrip('*')}[{i - len(positional)}]"
        )
        named.append((name, value))
    return named


def _leading_size(value: Any) -> int | None:
    """Dim 0 of the first tensor inside a (nested) batch: its batch size."""
    if isinstance(value, torch.Tensor):
        return int(value.shape[0]) if value.dim() else None
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            size = _leading_size(item)
            if size is not None:
                return size
    return None
