"""Backward passes and optimizer steps: when a batch ends and what each step changed."""

from __future__ import annotations

import gc
import math
import os
import sys
import threading

import torch

from tvis.record import params as param_records
from tvis.record.builder import BatchBuilder
from tvis.record.compiled import compiling

_RECORD_DIR = os.path.dirname(__file__)


class Steps:
    """The part of the Recorder that watches backward and the optimizers."""

    # -- backward ----------------------------------------------------------------------

    def _backward(self, original, tensors, *args, **kwargs):
        if compiling() or self.paused or self.in_backward:
            return original(tensors, *args, **kwargs)
        if threading.get_ident() != self.thread and not self.adopt_thread():
            return original(tensors, *args, **kwargs)
        if self.stopped or self.stop_due:
            self.check_stop()
        self.stop_counting()
        batch = None
        with self.work:
            try:
                batch = self.ensure_batch()
                if batch.mode is None:
                    batch.mode = "train"
                    self.count_train_batch()
                batch.forget_outside_grads()
                loss = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
                for extension in self.extensions:
                    extension.before_backward(self, batch, loss)
                if isinstance(loss, torch.Tensor) and loss.numel() == 1:
                    batch.loss = float(loss.detach()) / (batch.grad_scale or 1.0)
                    if not math.isfinite(batch.loss) and self.loss_bad is None:
                        self.loss_bad = (batch.index, self.step_index, batch.loss)
                # The forward's statistics are taken while backward runs (it holds the
                # interpreter lock rarely), not after the step.
                self.writer.put_stats(batch.take_pending())
                if self.settings.rank_digests:
                    self._watch_local_grads()
            except Exception as e:
                self.guard("preparing for backward", e)
        start = self.clock()
        self.in_backward += 1
        weak = batch.hold_weakly() if batch is not None else None
        try:
            return original(tensors, *args, **kwargs)
        finally:
            self.in_backward -= 1
            if batch is not None:
                batch.hold_strongly(weak)
                with self.work:
                    ms = (self.work.started - self.overhead - start) * 1e3
                    batch.phase_ms["backward"] = batch.phase_ms.get("backward", 0) + ms
                    batch.had_backward = True
                    self._after_backward(batch)

    def _watch_local_grads(self) -> None:
        """Note which parameters this process's own backward reaches: DDP fills in the
        gradient of a parameter unused on this rank from the other ranks, so after the
        all-reduce only this tells a locally unused parameter apart."""
        for root in self.roots.values():
            for p in root.parameters():
                if id(p) in self.grad_watched or not p.requires_grad:
                    continue
                self.grad_watched.add(id(p))
                self.handles.append(p.register_post_accumulate_grad_hook(self._local_grad))

    def _local_grad(self, p: torch.Tensor) -> None:
        self.local_grads.add(id(p))

    def _after_backward(self, batch: BatchBuilder) -> None:
        try:
            if self.no_optimizer is None and not self.optimizers:
                self.no_optimizer = not self._optimizer_exists()
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
                params += self.loose_params
                if param_records.sharded(params):
                    self.notice(param_records.SHARDED_NOTICE)
                    return
                self.snapshots = param_records.snapshot_tensors(params, self.param_state)
            snap = self._step_snapshot
            if self.in_step and snap is not None and not snap.get("closure_grads"):
                # LBFGS and other closure optimizers compute the gradients they use inside
                # step(closure): the first evaluation's replace what stood before the step.
                snap["closure_grads"] = True
                for capture in snap["params"].values():
                    param_records.capture_grad(capture, self.param_state.digests)
        except Exception as e:
            self.guard("after backward", e)

    def _optimizer_exists(self) -> bool:
        """Whether an optimizer exists that has not stepped yet. A script's optimizers are
        all built after tvis installs, so counting constructions answers; otherwise (an
        in-process recording of existing objects) one gc scan does."""
        if self.optimizers_built or self.whole_script:
            return bool(self.optimizers_built)
        return any(issubclass(type(o), torch.optim.Optimizer) for o in gc.get_objects())

    def _settle_manual_step(self) -> None:
        """In no-optimizer mode, the update between a backward and the next forward is
        that step's Δw."""
        snapshots, self.snapshots = self.snapshots, None
        if not snapshots:
            return
        with self.work:
            self._write_step(snapshots, optimizer=None)
        if self.step_index - self.first_step >= self.settings.steps:
            self.stop_due = True

    def function_boundary(self) -> None:
        """A project function called at the top of a batch after its backward starts the
        next batch (training code without nn.Module: a plain ``forward(params, x)``)."""
        self.settle_failed_steps()
        batch = self.batch
        if batch is None or not batch.had_backward or self.in_step or self.in_backward:
            return
        if any(c is not None and c.owner == batch.index for c in self.stack):
            return
        self._close_batch()
        self._settle_manual_step()

    # -- optimizer ---------------------------------------------------------------------

    def _step_pre(self, optimizer, args, kwargs) -> None:
        if compiling() or self.paused:
            return
        if threading.get_ident() != self.thread and not self.adopt_thread():
            return
        if self.stopped or self.stop_due:
            self.check_stop()
        self.stop_counting()
        self.settle_failed_steps()
        self.step_frames.append(_caller_outside_tvis())
        self.in_step = len(self.step_frames)
        self.stack_changed()  # the optimizer's own ops are no project line's
        with self.work:
            try:
                self.no_optimizer = False
                self.snapshots = None
                index = self.optimizers.setdefault(id(optimizer), len(self.optimizers))
                self.steps_per_optimizer.setdefault(index, 0)
                self._step_started = self.work.started - self.overhead
                self._step_snapshot = param_records.snapshot_optimizer(optimizer, self.param_state)
                if self._step_snapshot.get("sharded"):
                    self.notice(param_records.SHARDED_NOTICE)
            except Exception as e:
                self.guard("preparing for the optimizer step", e)

    def _step_post(self, optimizer, args, kwargs) -> None:
        if compiling() or threading.get_ident() != self.thread or self.paused:
            return
        if self.step_frames:
            self.step_frames.pop()
        self.in_step = len(self.step_frames)
        self.stack_changed()
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
        done = all(n >= self.settings.steps for n in self.steps_per_optimizer.values())
        if done and self.ranks_agree_to_stop():
            self.stop()

    def settle_failed_steps(self) -> None:
        """Forget optimizer steps that raised. A step that raises never runs its post
        hook; a script that catches the error (skipping a batch after an out-of-memory
        error) would otherwise stay "inside a step" for good, its next batches taken for
        LBFGS closure passes. A step whose frame has left the stack has ended."""
        if not self.step_frames:
            return
        alive = set()
        frame = sys._getframe(1)
        while frame is not None:
            alive.add(id(frame))
            frame = frame.f_back
        live = [f for f in self.step_frames if id(f) in alive]
        if len(live) == len(self.step_frames):
            return
        self.step_frames = live
        self.in_step = len(live)
        self._step_snapshot = None
        self.stack_changed()
        batch = self.batch
        if batch is not None and batch.had_backward and batch.step is None:
            self.stepless.add(batch.index)
            self.notice(
                f"an optimizer step raised an error that the script caught, after batch "
                f"{batch.index}; that batch belongs to no recorded step."
            )

    def _write_step(self, snapshot: dict, optimizer) -> None:
        step = self.step_index
        self.step_index += 1
        earlier = self.batches_waiting_for_a_step()
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
        record, jobs, raw_bytes = param_records.build_step(
            step,
            snapshot,
            optimizer,
            self._param_names(),
            batch_ids,
            self.param_state,
            self._bytes_left() if self.settings.keep_values else 0,
        )
        captures = list(snapshot["params"].values())
        snapshot["params"] = {}  # the jobs hold what is left of the copies
        dropped = record["step"].get("dropped")
        if dropped and self.settings.keep_values:
            self.notice(
                f"step {step}: --max-bytes left no room for the values of "
                f"{dropped['param_values']} of {dropped['params']} parameters (weight, "
                "gradient and Δw); they keep statistics only.",
            )
        record["step"]["loss"] = sum(losses) / len(losses) if losses else None
        if self.grad_watched:
            for c, param in zip(captures, record["params"], strict=True):
                if id(c.p) in self.grad_watched:
                    param["local_grad"] = id(c.p) in self.local_grads
            self.local_grads.clear()
        for p in record["params"]:
            self.param_table.setdefault(
                p["name"], {k: p[k] for k in ("name", "module", "shape", "dtype")}
            )
        if optimizer is not None and self.batch_done(current):
            # On disk with its step, not when the next batch opens (and before the step
            # is listed, so an index never lists a step that is not written yet).
            self._close_batch()
        self.step_maps.append(record["step"])
        self.writer.put_step(step, record, jobs, raw_bytes)
        self.write_index()
        # A finished step is on disk before the next one starts: a kill -9 later loses
        # at most the batches of the step in progress.
        self.writer.flush()

    def batch_done(self, batch: BatchBuilder | None) -> bool:
        """Whether ``batch`` is a training batch whose step has come and none of whose
        calls is still open (a ``train_step()`` that steps keeps it open until it returns)."""
        return (
            batch is not None
            and batch.mode == "train"
            and batch.step is not None
            and not any(c is not None and c.owner == batch.index for c in self.stack)
        )

    def end_stepped_batch(self) -> None:
        """After a project call returns: if it held open a batch whose step has come, the
        batch is written now, with its step, rather than when the next batch opens."""
        if self.batch_done(self.batch):
            self._close_batch()
            self.writer.flush()

    def _param_names(self) -> dict[int, tuple[str, str]]:
        names: dict[int, tuple[str, str]] = {}
        for root in self.roots.values():
            for module_name, module in root.named_modules():
                for pname, p in module._parameters.items():
                    if p is not None and id(p) not in names:
                        # Named as its module is (under its model's name when two
                        # models' layers would share names: module_name in module_calls).
                        mod = self.module_names.get(id(module), module_name)
                        path = f"{mod}.{pname}" if module_name else pname
                        names[id(p)] = (path, self.module_names.get(id(module), module_name))
        for p in self.loose_params or []:  # raw leaf tensors: named as the script names them
            name = self._global_name(p) if id(p) not in names else None
            if name is not None:
                names[id(p)] = (name, "")
        return names


def _caller_outside_tvis():
    """The frame that called into tvis's hook: torch's ``step`` wrapper."""
    frame = sys._getframe(2)
    while frame.f_back is not None and os.path.dirname(frame.f_code.co_filename) == _RECORD_DIR:
        frame = frame.f_back
    return frame
