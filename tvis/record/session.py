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

import contextlib
import threading
import time
import traceback
from collections import Counter
from functools import partial
from typing import Any

import torch

from tvis.record import cuda_timing, sample_cap, tensors
from tvis.record import params as param_records
from tvis.record.builder import (
    ANOMALY_INPUTS,
    BatchBuilder,
    Call,
    Settings,
    first_line,
)
from tvis.record.compiled import never_compiled, quiet_hooks_warning
from tvis.record.extension import Extension
from tvis.record.module_calls import ModuleCalls
from tvis.record.patches import Patches
from tvis.record.project import Project
from tvis.record.repeats import Repeats
from tvis.record.steps import Steps
from tvis.record.stop import StopRecording
from tvis.record.writer_thread import BackgroundWriter
from tvis.store import schema
from tvis.store.printable import human_bytes

_perf = time.perf_counter
# Whether a torch.func transform (vmap, grad, jacrev) is running; private, so looked up once.
_transforms_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)
# The notice the first run of each kind of re-run gets (Recorder.rerun).
_RERUN_NOTICES = {
    "transform": "the script runs the model under torch.func transforms (vmap, grad); tvis "
    "records its training forward and backward, not those runs.",
    "recompute": "the model recomputes forwards during backward (activation checkpointing); "
    "tvis records each forward once, as it first ran.",
}


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

    __slots__ = ("recorder", "started", "_plain", "_lifted")

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.started = 0.0
        # tvis's own torch ops bypass every __torch_function__ (its own line mode, the
        # user's modes and tensor subclasses): cheaper, and tvis never records itself.
        self._plain = torch._C.DisableTorchFunction()
        self._lifted = False

    def __enter__(self) -> None:
        rec = self.recorder
        if not rec.busy:
            self.started = _perf()
            self._plain.__enter__()
            # While a trace function is set, CPython runs every frame on its slow path and
            # calls the tracer for each: tvis's own work runs with its call hook off. (On
            # sys.monitoring tvis's code is disabled at its first call; lifting still keeps
            # a project function tvis calls from being recorded.)
            self._lifted = rec.call_hook is not None and rec.call_hook.lift()
        rec.busy += 1

    def keep_lifted(self) -> None:
        """Leave the call hook off when the outermost bracket ends (tvis paused it)."""
        self._lifted = False

    def __exit__(self, *exc) -> None:
        rec = self.recorder
        rec.busy -= 1
        if not rec.busy:
            if self._lifted:
                rec.call_hook.put_back()
            self._plain.__exit__(None, None, None)
            rec.overhead += _perf() - self.started


class Recorder(ModuleCalls, Repeats, Steps):
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
        self.thread = threading.get_ident()  # the thread recorded: the one that trains
        self.origin = self.thread  # the thread the script runs on
        self.script_lock = threading.Lock()
        self.script_done = False  # set (under script_lock) once the script has returned
        self.stopped_origin = False  # the script's thread was interrupted to stop it
        self.patches = Patches()
        self.handles: list = []
        self.notices: list[dict] = []
        self._notice_keys: set[str] = set()
        self.overhead = 0.0
        self.busy = 0
        self.call_hook = None  # the function tracer's hook (call_hook.py), once installed
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
        self.first_step = 0  # the script's step number of the first step recorded
        self.step_index = 0
        self.in_step = 0  # optimizer steps open now: len(step_frames)
        self.step_frames: list = []  # torch's step wrapper's frame per open step
        self.stepless: set[int] = set()  # batches whose step raised
        self.in_backward = 0
        self.noted_reruns: set[str] = set()
        self.in_loss = 0
        self.snapshots: dict | None = None
        self.param_state = param_records.ParamState(
            settings.param_elems if settings.keep_values else 0,
            digests=settings.rank_digests,
            grad_bits=settings.mantissa_bits,
        )
        self.loss_bad: tuple | None = None  # (batch, step, value) of the first NaN/Inf loss
        self.anomalies: list[dict] = []  # the run's summary, once the writer is done
        self.no_optimizer: bool | None = None
        self.module_names: dict[int, str] = {}
        self.roots: dict[int, torch.nn.Module] = {}
        self.signatures: dict[type, list[str]] = {}
        self.in_data = 0
        self.open_modules = 0  # module calls in progress: 0 means the next one is a root
        # Module calls open inside a light group's repeated forward that is counted, not
        # recorded (0: none is running); and when it began and its line's record.
        self.counting = 0
        self._counted: tuple[float, dict | None] = (0.0, None)
        self._aside = None  # tvis's global module hooks out of torch's tables meanwhile
        self.root_hooks: dict[int, tuple] = {}  # on a light group's counted root modules
        self._root_entered = False  # the counted root's own call reached its hooks
        self.module_hook_ids: tuple[int, int] = (-1, -1)  # their keys in those tables
        self.data_info: dict[str, Any] = {}
        self.stopped = False
        self.stop_due = False  # steps are done; stop at the next hook that may raise
        self.loose_params: list | None = None
        self.optimizers_built = 0
        self.whole_script = False  # set when everything the script builds happens under tvis
        self.on_hard_stop = None
        self._loud_again = None  # undoes quiet_hooks_warning
        self.rank_stop = None  # under a launcher: where all ranks stop (rank_stop.py)
        self.paused = False  # set while tvis runs its own autograd passes (Grad-CAM)
        self.replay_refused: str | None = None  # why Grad-CAM may not replay (for the run)
        self.extensions: list = []
        self.carried: list[Call] = []
        self.stack_watchers: list = []
        self.contributors: Counter[str] = Counter()
        # Calls the caps left out of training batches, by name, and the one notice that
        # counts them (rewritten as batches add to it).
        self.capped: Counter[str] = Counter()
        self.capped_batches = 0
        self._cap_notice: dict | None = None
        self._noted_sample_cap = False
        self.grad_watched: set[int] = set()  # parameters whose local gradients are noted
        self.local_grads: set[int] = set()  # ... and those that got one since the last step
        # Lines run between batches (a training loop fetching the next batch): the next
        # training batch takes them (tvis/record/ops.py).
        self.early_lines: dict = {}
        # The last training batch written and its record, until the next one opens: lines
        # that run after it with no batch to take them (after the loop) join it at the end.
        self.last_written: tuple[int, dict] | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def install(self, step_hooks: bool = True) -> None:
        """Put tvis's hooks and patches in. ``step_hooks=False``: the caller already holds
        global optimizer step hooks and forwards them (a late start installs from inside
        one, where torch does not allow adding another)."""
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim_module

        never_compiled()
        module_hooks = [
            nn_module.register_module_forward_pre_hook(self._module_pre),
            nn_module.register_module_forward_hook(
                self._module_post, with_kwargs=True, always_call=True
            ),
        ]
        self.module_hook_ids = (module_hooks[0].id, module_hooks[1].id)
        self.handles += module_hooks
        if step_hooks:
            self.handles += [
                optim_module.register_optimizer_step_pre_hook(self._step_pre),
                optim_module.register_optimizer_step_post_hook(self._step_post),
            ]
        original_backward = torch.autograd.backward
        self.patches.set(torch.autograd, "backward", partial(self._backward, original_backward))
        original_init = torch.optim.Optimizer.__init__

        def counting_init(optimizer, *args, **kwargs):
            self.optimizers_built += 1
            return original_init(optimizer, *args, **kwargs)

        self.patches.set(torch.optim.Optimizer, "__init__", counting_init)
        previous_hook = threading.excepthook

        def quiet_stop(args) -> None:
            # A training thread ended by tvis's stop is not an error to print.
            if not issubclass(args.exc_type, StopRecording):
                previous_hook(args)

        self.patches.set(threading, "excepthook", quiet_stop)
        self._loud_again = quiet_hooks_warning()
        for extension in self.extensions:
            extension.install(self)
        self.stack_watchers = [
            e
            for e in self.extensions
            if type(e).on_call_stack_change is not Extension.on_call_stack_change
        ]

    def stack_changed(self) -> None:
        """Tell the extensions that watch it that the innermost open call may have changed."""
        for extension in self.stack_watchers:
            extension.on_call_stack_change(self)

    def uninstall(self) -> None:
        self.stop_counting()
        self.remove_root_hooks()
        for extension in reversed(self.extensions):
            try:
                extension.uninstall(self)
            except Exception as e:  # never leave the rest installed because one failed
                self.notice(f"tvis could not remove its {type(extension).__name__}: {e}")
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.patches.restore()
        if self._loud_again is not None:
            self._loud_again()
            self._loud_again = None

    def finish(self) -> None:
        """Close what is open and write the run index; safe to call more than once."""
        try:
            self._settle_manual_step()
        except Exception as e:
            self.notice(f"tvis could not record the last manual update: {e}")
        self._close_batch()
        self._flush_light()
        if self.early_lines and self.last_written is not None:
            self.writer.put_late_lines(*self.last_written, list(self.early_lines.values()))
            self.early_lines = {}
        self.write_index()

    # -- notices -----------------------------------------------------------------------

    def notice(self, text: str, level: str = "warn") -> None:
        if text not in self._notice_keys:
            self._notice_keys.add(text)
            self.notices.append({"level": level, "text": text})

    def guard(self, what: str, error: Exception) -> None:
        where = traceback.extract_tb(error.__traceback__)[-1]
        self.notice(
            f"tvis failed while {what} ({type(error).__name__}: {first_line(error)} at "
            f"{where.filename.rsplit('/', 1)[-1]}:{where.lineno}); training was not affected."
        )

    # -- time --------------------------------------------------------------------------

    def clock(self) -> float:
        """Training time: wall time minus tvis's own work so far."""
        return _perf() - self.overhead

    # -- batches -----------------------------------------------------------------------

    def _new_batch(self, light: bool = False) -> BatchBuilder:
        batch = BatchBuilder(self.next_index, self.settings, light=light)
        # On the training clock, as every call's start is: raw wall time here would put each
        # call after the first batch before its batch began, by the overhead so far.
        batch.started = self.clock()
        self.next_index += 1
        if not light:
            batch.lines, self.early_lines = self.early_lines, {}
            self.last_written = None
        batch.bytes_left = self._bytes_left()
        batch.samples = self._samples_within_budget(batch.bytes_left)
        self._reopen_carried(batch)
        for extension in self.extensions:
            extension.on_batch_open(self, batch)
        return batch

    def _bytes_left(self) -> int:
        """What --max-bytes still allows (values written, queued, or held by open batches)."""
        if self.writer.disk_full:
            return 0
        held = sum(b.kept_bytes for b in (self.batch, self.light_group) if b is not None)
        return int(self.settings.max_bytes * VALUES_SHARE) - self.writer.bytes_queued - held

    def _samples_within_budget(self, left: int) -> int:
        """Samples kept with values, degrading as the run nears --max-bytes: all the
        asked samples, then one, then statistics only."""
        budget = self.settings.max_bytes
        if self.writer.disk_full:
            return 0  # the disk_full notice says why
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

    def rerun(self) -> str | None:
        """How the model is running again rather than as training's forward, if it is:
        ``"recompute"`` (activation checkpointing, during backward with gradients on) or
        ``"transform"`` (a ``torch.func`` transform, such as ``vmap(grad(...))`` for
        per-sample gradients, calling it functionally on wrapped tensors). Neither is
        recorded: the first forward's calls hold those values, and a recomputation's own
        control flow (``_StopRecomputationError``) is torch's. The first time, a notice
        says so."""
        if _transforms_active():
            kind = "transform"
        elif self.in_backward and torch.is_grad_enabled():
            kind = "recompute"
        else:
            return None
        if kind not in self.noted_reruns:
            self.noted_reruns.add(kind)
            self.notice(_RERUN_NOTICES[kind], level="info")
        return kind

    def ensure_batch(self) -> BatchBuilder:
        if self.batch is None:
            self.batch = self._new_batch()
        return self.batch

    def _start_train_batch(self) -> BatchBuilder:
        """A grad-enabled root forward: the current batch, or a new one after a backward."""
        self.settle_failed_steps()
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
            self.count_train_batch()
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
        if batch is not None and batch is not self.light_group:
            # Calls begun before the first forward (a ``generate()`` or ``estimate_loss()``
            # called between steps) belong to the group.
            self._carry_open_calls(batch)
        group = self.light_group
        if group is None:
            group = self.light_group = self._new_batch(light=True)
            group.step = self.step_index
        else:
            self._reopen_carried(group)
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
        self.remove_root_hooks()
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
            for problem, n in batch.failures.items():
                self.notice(
                    f"tvis could not read {n} tensor(s) of batch {batch.index} ({problem}); "
                    "they are recorded as not captured."
                )
            self._note_capped(batch)
            record = batch.record()
            record[ANOMALY_INPUTS] = (
                batch.finite_checks,
                batch.exit_seq,
                batch.grad_arrivals,
                batch.line_inputs,
            )
            batch.finite_checks, batch.line_inputs = [], []
            self.batch_maps.append(record["batch"])
            self._cap_samples(batch)
            self._account(record, batch.arrays)
            self.writer.put_batch(batch.index, record, batch.arrays, batch.pending)
            if batch.mode == "train":
                self.last_written = (batch.index, record)
            self.write_index()
        except Exception as e:
            self.guard(f"writing batch {batch.index}", e)

    def _cap_samples(self, batch: BatchBuilder) -> None:
        """A batch whose kept samples are huge keeps fewer (sample_cap.py; the builder cut
        them already when they passed the cap as they were captured); one notice."""
        keep = sample_cap.samples_that_fit(batch.entries, batch.arrays, batch.samples)
        if keep < batch.samples:
            batch.kept_bytes -= sample_cap.cut(batch.entries, batch.arrays, keep)
        elif batch.samples_capped is None:
            return
        if not self._noted_sample_cap:
            self._noted_sample_cap = True
            self.notice(
                f"this model's samples are large: batches keep the values of {keep} sample(s), "
                f"what fits in {human_bytes(sample_cap.BATCH_VALUES_BYTES)} (statistics, "
                "per-sample losses and Grad-CAM still cover the whole batch).",
                level="info",
            )

    def _note_capped(self, batch: BatchBuilder) -> None:
        """One notice for the whole run: how many calls the caps left out, of what."""
        if batch.light or not batch.dropped_calls:
            return
        self.capped_batches += 1
        for (name, _, _), n in batch.dropped_sites.items():
            self.capped[name] += n
        named = ", ".join(f"{name} ×{n:,}" for name, n in self.capped.most_common(3))
        more = ", …" if len(self.capped) > 3 else ""
        text = (
            f"tvis counted {sum(self.capped.values()):,} call(s) in {self.capped_batches} "
            f"batch(es) instead of recording them ({named}{more}): past "
            f"{self.settings.call_cap:,} calls a batch records no more project helpers, and "
            f"past {self.settings.module_repeats:,} calls of one "
            'module no more of that module. The call tree shows them as "×N more" where '
            "they ran; every other module and the loss are recorded."
        )
        if self._cap_notice is None:
            self._cap_notice = {"level": "warn", "text": text}
            self.notices.append(self._cap_notice)
        else:
            self._cap_notice["text"] = text

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
            call.flags.append(schema.CARRIED)
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
            batch.relabel_batch_dims()  # what the pipeline's own code returned earlier
        batch.phase_ms["data"] = batch.phase_ms.get("data", 0) + seconds * 1e3
        batch.sections.setdefault("data", {})["batch"] = batch.args(
            named, keep_values=not batch.light
        )
        if self.settings.rank_digests:
            batch.digest = tensors.digest_tree([value for _, value in named])

    @contextlib.contextmanager
    def quiet(self):
        """Run a stretch of the script unobserved (function tracing and line ops off)."""
        for extension in self.extensions:
            extension.pause()
        try:
            yield
        finally:
            for extension in reversed(self.extensions):
                extension.resume()

    def first_batch_of_step(self) -> bool:
        """Whether the open batch is the first of its optimizer step (no earlier batch is
        waiting for a step)."""
        return not self.batches_waiting_for_a_step()

    def batches_waiting_for_a_step(self) -> list[dict]:
        return [
            b
            for b in self.batch_maps
            if b.get("step") is None and not b["light"] and b["index"] not in self.stepless
        ]

    def count_train_batch(self) -> None:
        self.train_batches += 1
        if self.rank_stop is not None:
            self.rank_stop.began(self.train_batches)

    # -- stopping ----------------------------------------------------------------------

    def ranks_agree_to_stop(self) -> bool:
        """This rank has its steps: whether every rank stops here too (always, alone)."""
        if self.rank_stop is None:
            return True
        with self.work:
            agreed = self.rank_stop.agree(self.train_batches)
        if not agreed:
            self.notice(
                "the ranks step at different cadences (gradient accumulation on some): "
                f"this rank records past its {self.settings.steps} steps, to the first batch "
                "where every rank has them, so that no rank is left waiting in a collective.",
                level="info",
            )
        return agreed

    def check_stop(self) -> None:
        """Raise StopRecording if the recording is over (called where raising is safe)."""
        if self.stop_due:
            self.stop_due = False
            self.stop()
        if self.stopped:
            self.stop_again()

    def stop(self) -> None:
        self.stopped = True
        if threading.get_ident() != self.origin:
            self._stop_origin()
        raise StopRecording()

    def _stop_origin(self) -> None:
        """Training runs on another thread: the script's own thread (waiting for it, or
        doing anything else) must stop too, so code after training does not run. It gets
        a simulated Ctrl-C, which the runner reads as this stop (``stopped_origin``)."""
        import _thread

        with self.script_lock:
            if not self.script_done:
                self.stopped_origin = True
                _thread.interrupt_main()

    def script_returned(self) -> None:
        """The script's thread left the script: no training thread may stop it from now on."""
        with self.script_lock:
            self.script_done = True

    # -- threads -----------------------------------------------------------------------

    def adopt_thread(self) -> bool:
        """Called from a hook on a thread tvis does not record, where training begins
        (a grad forward, a backward, a step): while nothing has trained on the recorded
        thread, this thread becomes the one recorded. Whether it now is."""
        if (
            self.train_batches
            or self.step_index > self.first_step
            or self.stack
            or self.open_modules
        ):
            self.notice(
                f"the script also trains on thread {threading.current_thread().name!r}; tvis "
                "records only the thread that trained first.",
            )
            return False
        self.thread = threading.get_ident()
        self.notice(
            f"the script trains on thread {threading.current_thread().name!r}; tvis records "
            "that thread (per-line op shapes are recorded on the main thread only).",
            level="info",
        )
        for extension in self.extensions:
            extension.on_thread_adopted(self)
        return True

    def stop_again(self) -> None:
        """The script caught StopRecording and went on: training code ran after the stop.
        Raising again would meet the same ``except``, so tvis saves the run and ends the
        process (code after the loop must not run, and nothing recorded is lost)."""
        self.notice(
            "the script caught tvis's stop signal (a bare `except:` or `except "
            "BaseException`?) and kept going; tvis saved the run and ended it."
        )
        if self.on_hard_stop is not None:
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
            "anomalies": self.anomalies,
            "data": self.data_info,
            "project": self.project.root,
            "model": {
                "roots": [self.module_names.get(i) for i in self.roots],
                "params": sum(p.numel() for r in self.roots.values() for p in r.parameters()),
            },
        }


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
