"""Module calls as the recorder sees them: global forward hooks in, calls and gradients out."""

from __future__ import annotations

import bisect
import inspect
import sys
import threading
from dataclasses import replace
from functools import partial
from typing import Any

import torch

from tvis.record import backward_loss, cuda_timing, gradcam_replay, ops, seq_first
from tvis.record import params as param_records
from tvis.record.builder import BatchBuilder, Call
from tvis.record.compiled import compiling
from tvis.record.data import note_normalize
from tvis.record.stop import StopRecording
from tvis.store import schema

# Layers that mix the samples of a batch (statistics over the batch in training mode).
_MIXING = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm2d"}


def _is_patch_embedding(module: torch.nn.Module) -> bool:
    """A conv that cuts its input into patches (kernel = stride > 1, no padding): a ViT's
    token projection rather than a feature map with overlapping receptive fields."""
    return (
        isinstance(module, torch.nn.Conv2d)
        and module.kernel_size == module.stride
        and max(module.kernel_size) > 1
        and module.padding in ((0, 0), "valid")
    )


# torch's module call machinery (``_wrapped_call_impl``, ``_call_impl``), between a module
# call and the line that made it.
_MODULE_FILE = torch.nn.modules.module.__file__


class ModuleCalls:
    """The part of the Recorder that handles ``nn.Module`` calls and their gradients."""

    # -- modules -----------------------------------------------------------------------

    def module_name(self, module: torch.nn.Module) -> str:
        name = self.module_names.get(id(module))
        if name is None and self.in_data:
            # A transform: named like a model, but not one of the run's models.
            name = self.module_names[id(module)] = (
                self._global_name(module) or type(module).__name__
            )
            return name
        if name is None:
            root_name = self._global_name(module) or type(module).__name__
            self.roots[id(module)] = module
            if self.settings.gradcam and param_records.sharded(module.parameters()):
                # Its extra backward would run FSDP's collectives on this rank alone.
                self.settings = replace(self.settings, gradcam=False)
                self.notice(param_records.SHARDED_GRADCAM_NOTICE)
            subs = [(n, m) for n, m in module.named_modules() if id(m) not in self.module_names]
            # A second model whose layers would share names with the first one's (a GAN's
            # two `main` Sequentials): its layers are named under its own name.
            taken = set(self.module_names.values())
            clash = self.roots.keys() - {id(module)} and any(n in taken for n, _ in subs if n)
            for sub_name, sub in subs:
                full = f"{root_name}.{sub_name}" if clash and sub_name else sub_name
                self.module_names[id(sub)] = full or root_name
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
        if compiling():
            return
        if self.counting and threading.get_ident() == self.thread:
            self.counting += 1  # inside a repeated forward that is counted, not recorded
            return
        if self.paused or self.rerun():
            return
        if threading.get_ident() != self.thread and not (
            torch.is_grad_enabled() and self.adopt_thread()
        ):
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
            for extension in self.stack_watchers:
                extension.on_call_stack_change(self)

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
        # A transform module inside the data pipeline sees one item, not the batch.
        if batch.batch_size is None and not is_loss and not self.in_data:
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            if first is not None and first.dim() > 0:
                batch.batch_size = int(first.shape[0])
                batch.input_shape = tuple(first.shape)
        elif batch.batch_size is not None and not is_loss and not self.in_data:
            seq_first.settle(batch, module, args)
        self.open_modules += 1
        if self.open_modules == 1 and batch.light and not self.in_data:
            if self.counts_repeat(batch, module, self._caller_line()):
                return
        if self._drops_module(batch, self.module_name(module), is_loss):
            self.drop_call(batch, self.module_name(module), type(module).__name__)
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
            line_key=self._caller_line(),
            t0=(t0 - batch.started) * 1e3,
            no_grad=not grad,
            project=self.project.is_project_class(cls),
        )
        if _is_patch_embedding(module):
            call.flags.append(schema.PATCH_EMBEDDING)
        if is_loss:
            self.in_loss += 1
        call.inputs = batch.args(_name_args(self._arg_names(module), args), not batch.light)
        self.open_call(batch, call)
        cuda_timing.start(call, args)

    def _drops_module(self, batch: BatchBuilder, name: str, is_loss: bool) -> bool:
        """Whether this module call is counted rather than recorded: in a full light group;
        in a training batch, past ``module_repeats`` calls of the same module (an RNN cell over
        a very long sequence), or inside a call so dropped. Other modules and the loss are
        recorded however many calls came before."""
        if batch.light:
            return batch.full
        if is_loss:
            return False
        batch.module_calls[name] += 1
        return batch.module_calls[name] > self.settings.module_repeats or self.dropping()

    def dropping(self) -> bool:
        """Whether a call being counted, not recorded, is open: what runs inside it is too."""
        return None in self.stack

    def drop_call(self, batch: BatchBuilder, name: str, cls: str | None) -> None:
        """Count a call the cap leaves out, under the recorded call it runs in."""
        parent = next(
            (c for c in reversed(self.stack) if c is not None and c.owner == batch.index), None
        )
        batch.dropped_calls += 1
        batch.dropped_sites[(name, cls, parent.id if parent else -1)] += 1

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

    def _module_post(self, module, args, *rest) -> None:
        # torch calls this hook as (module, args, kwargs, output) after a forward, but as
        # (module, args, output) when the forward raised: the call must still be closed,
        # or every later forward of a script that catches the error nests under it.
        if compiling() or threading.get_ident() != self.thread:
            return
        if self.counting:
            self.counted_exit(module)
            return
        if self.paused:
            return
        rerun = self.rerun()
        if rerun:
            if rerun == "recompute" and len(rest) == 2:
                with self.work:
                    try:
                        self._hook_recomputed(module, rest[1])
                    except Exception as e:
                        self.guard(f"hooking the recomputed {type(module).__name__}", e)
            return
        with self.work:
            try:
                if len(rest) == 2:
                    self._exit_module(module, args, rest[0], rest[1])
                else:
                    self._exit_raised(module, sys.exc_info()[1])
            except Exception as e:
                self.guard(f"recording the output of {type(module).__name__}", e)
            for extension in self.stack_watchers:
                extension.on_call_stack_change(self)

    def _pop_module_call(self) -> Call | None:
        """Close the innermost open module call; None when it was not recorded."""
        if not self.stack or not self.open_modules:
            return None
        self.open_modules -= 1
        call = self.stack.pop()
        while call is not None and call.kind == "function" and self.stack:
            call.frame = None
            call = self.stack.pop()  # a function that raised inside this module's forward
        if call is not None:
            # The forward's frame, kept for attributing its ops to lines, holds every local
            # of the forward: kept past the return, an evaluation loop's activations would
            # all stay alive until its group closes.
            call.frame = None
        if call is not None and call.kind == "loss":
            self.in_loss = max(0, self.in_loss - 1)
        batch = self.batch
        if call is None or batch is None or call.owner != batch.index:
            return None
        call.fwd_ms = (self.work.started - self.overhead - batch.started) * 1e3 - call.t0
        batch.seq += 1
        batch.exit_seq[call.id] = batch.seq
        cuda_timing.stop(call)
        return call

    def _exit_raised(self, module, error: BaseException | None) -> None:
        """A forward that raised: its call is closed with no outputs and flagged."""
        call = self._pop_module_call()
        if call is None:
            return
        call.flags.append(schema.RAISED)
        what = type(error).__name__ if error is not None else "an exception"
        self.notice(
            f"the forward of {call.name} raised {what}; tvis "
            "recorded that call as raised (flag `raised`, no outputs).",
            level="info",
        )

    def _exit_module(self, module, args, kwargs, output) -> None:
        call = self._pop_module_call()
        if call is None:
            return
        batch = self.batch
        keep = not batch.light
        if keep:
            backward_loss.note_scalar(batch, output, ("call", call, module, args, kwargs or {}))
            grad = torch.is_grad_enabled()
            if call.depth == 0 and call.kind == "module" and self.settings.gradcam and grad:
                gradcam_replay.note_root(batch, call, module, args, kwargs, output)
        if kwargs:
            call.inputs += batch.args(list(kwargs.items()), keep)
        call.outputs = batch.args([("out", output)], keep)
        ops.note_call_result(self, batch, call, output)
        if call.depth == 0:
            phase = "loss" if call.kind == "loss" else "forward"
            batch.phase_ms[phase] = batch.phase_ms.get(phase, 0) + call.fwd_ms
        self._flag_call(batch, call)
        if keep and schema.MIXES_SAMPLES in call.flags and self.settings.gradcam:
            gradcam_replay.note_norm(batch, call, output)
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

    def _caller_line(self) -> tuple | None:
        """(file, line) of the project line calling this module directly (through torch's
        call machinery only), or None: a submodule called by library code."""
        frame = sys._getframe(3)
        while frame is not None and frame.f_code.co_filename == _MODULE_FILE:
            frame = frame.f_back
        if frame is None or self.project.relpath(frame.f_code.co_filename) is None:
            return None
        return (frame.f_code.co_filename, frame.f_lineno)

    def call_site(self) -> list | None:
        """The innermost project frame calling into torch (what the user wrote)."""
        frame = sys._getframe(3)
        while frame is not None:
            rel = self.project.relpath(frame.f_code.co_filename)
            if rel is not None:
                return [rel, frame.f_lineno]
            frame = frame.f_back
        return None

    def _flag_call(self, batch: BatchBuilder, call: Call) -> None:
        """Marks known at the call's exit (those that read statistics come when the batch
        is written: ``builder.settle``)."""
        for arg in call.outputs:
            entry = batch.entries[arg["tensor"]] if "tensor" in arg else None
            if entry and entry.get("value") and entry["value"].get("kept") != "all":
                call.flags.append(schema.TRUNCATED)
        if call.cls in _MIXING and call.kind == "module":
            call.flags.append(schema.MIXES_SAMPLES)

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

    def _hook_recomputed(self, module: torch.nn.Module, output) -> None:
        """A forward recomputed during backward (reentrant checkpointing ran the first one
        without gradients): the gradient of the call the first forward recorded arrives at
        this output, so it is hooked for that call's output entry (the latest one of the
        module's calls not hooked yet, of the same shape)."""
        batch = self.batch
        if batch is None or batch.light or not getattr(output, "requires_grad", False):
            return
        name = self.module_name(module)
        for call in reversed(batch.calls):
            entry_id = call.outputs[0].get("tensor") if call.outputs else None
            if call.name != name or entry_id is None or entry_id in batch.hooked:
                continue
            if batch.entries[entry_id]["shape"] == list(output.shape):
                batch.hooked.add(entry_id)
                hook = partial(self._on_grad, batch, entry_id)
                batch.grad_handles.append(output.register_hook(hook))
                return

    def _on_grad(self, batch: BatchBuilder, entry_id: int, grad: torch.Tensor) -> None:
        if self.paused:
            return None
        with self.work:
            try:
                at = (self.work.started - self.overhead - batch.started) * 1e3
                batch.grad_arrivals.append((at, entry_id))
                if batch.entries[entry_id].get("grad") is None:
                    # Of the loss itself, not of a GradScaler's multiple of it.
                    unscaled = grad / batch.grad_scale if batch.grad_scale else grad
                    batch.gradient(entry_id, unscaled)
                    if not self.in_backward:
                        batch.outside_grads.add(entry_id)
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
            # The first arrival after start, found by bisection: a scan per call would be
            # quadratic in a batch of 20,000 calls.
            later = bisect.bisect_right(times, start)
            end = max(ins) if ins else (times[later] if later < len(times) else start)
            call.bwd_ms = max(end - start, 0.0)
            call.flags.append(schema.BWD_INFERRED)


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
