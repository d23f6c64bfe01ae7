"""`tvis run --watch`: a light look at every optimizer step, and the stop at the first anomaly.

Per step it keeps the loss each backward ran on (a reference, read once at the step), the
gradient norm of every param group (one fused ``_foreach_norm`` per optimizer), non-finite
counts where a norm is not finite, the learning rate and the step's wall time. Nothing of the
model is hooked, nothing is copied, and tvis's own ops bypass ``__torch_function__``.

Steps are counted by the first optimizer that steps (a GAN's second optimizer is part of the
same step). The anomaly is judged at each optimizer's pre-hook, before the update: there the
loss and the gradients of the step are known, and raising ``StopRecording`` leaves the
parameters as they were before the step that went wrong.
"""

from __future__ import annotations

import math
import statistics
import time
import weakref
from collections import deque
from functools import partial
from pathlib import Path

import torch

from tvis.record.grad_scaler import note_scaled
from tvis.record.patches import Patches
from tvis.record.stop import StopRecording
from tvis.store import watch as store

# Seconds between rewrites of watch.msgpack while the script trains: a killed run loses
# at most this much of its series, and a 10,000-step series (280 KB) costs ~1 ms to write.
FLUSH_SECONDS = 2.0

# Spikes: a step's loss or gradient norm above FACTOR × the median of the last WINDOW
# steps. The median ignores the spike itself and a few noisy steps; it is judged only once
# MIN_HISTORY steps are seen, so the first steps of training (which fall fast) never count.
SPIKE_FACTOR = 10.0
SPIKE_WINDOW = 100
MIN_HISTORY = 20

CHECKS = ("nan", "spike")


def parse_checks(text: str) -> list[str]:
    """``--watch`` / ``--watch=nan,spike``: the checks asked for (ValueError if unknown)."""
    checks = [c.strip().lower() for c in text.split(",") if c.strip()] or ["nan"]
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise ValueError(f"--watch takes nan and spike, not {', '.join(unknown)}")
    return sorted(set(checks) | {"nan"}, key=CHECKS.index)


class Watch:
    """The per-step series of one process, and its stop at the first anomaly."""

    def __init__(
        self,
        run_dir: Path | None,
        checks: list[str],
        factor: float = SPIKE_FACTOR,
        window: int = SPIKE_WINDOW,
        expect: dict | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.series = store.Series(checks=checks, spike={"factor": factor, "window": window})
        self.factor, self.window = factor, window
        self.stops = expect is None  # a re-run's check only compares, never stops
        self.expect = expect  # a watch series to compare each step's loss bits against
        self.diverged: tuple[int, float, float] | None = None  # (step, now, then)
        self.patches = Patches()
        self.handles: list = []
        self.primary: int | None = None  # id of the optimizer that counts steps
        self._pending: dict | None = None  # an anomaly seen, waiting for the ranks to agree
        self.on_hard_stop = None  # called if the script swallows the stop and steps again
        self._losses: list[tuple[torch.Tensor, float]] = []  # (loss, GradScaler's scale)
        self._scaled: tuple | None = None  # (weakref to GradScaler.scale's output, scaler)
        self._norms: list[float] = []
        self._nonfinite: list[int] = []
        self._lr = math.nan
        self._started = time.perf_counter()
        self._flushed = self._started
        self._recent_loss: deque[float] = deque(maxlen=window)
        self._recent_norm: deque[float] = deque(maxlen=window)
        self._plain = torch._C.DisableTorchFunction

    # -- hooks -----------------------------------------------------------------------

    def install(self, step_hooks: bool = True) -> None:
        from torch.optim import optimizer as optim_module

        self.patches.set(
            torch.autograd, "backward", partial(self._backward, torch.autograd.backward)
        )

        def note(out, scaler) -> None:
            self._scaled = (weakref.ref(out), scaler)

        note_scaled(self.patches, note)
        if step_hooks:
            self.handles += [
                optim_module.register_optimizer_step_pre_hook(self.step_pre),
                optim_module.register_optimizer_step_post_hook(self.step_post),
            ]

    def uninstall(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.patches.restore()

    def _backward(self, original, tensors, *args, **kwargs):
        loss = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
        try:
            if isinstance(loss, torch.Tensor) and loss.numel() == 1:
                factor = 1.0
                if self._scaled is not None and self._scaled[0]() is loss:
                    # A GradScaler's loss × scale: kept in the optimizer's units, as the
                    # recorder keeps it (the scale is a power of two: exact).
                    factor = float(self._scaled[1].get_scale()) or 1.0
                self._losses.append((loss.detach(), factor))
        except Exception:
            pass  # never the script's problem: this step's loss is left out
        return original(tensors, *args, **kwargs)

    def step_pre(self, optimizer, args, kwargs) -> None:
        if self.primary is None:
            self.primary = id(optimizer)
        if not self.stops:
            return  # a re-run's check needs the loss only
        try:
            with self._plain():
                self._take_grads(optimizer)
        except Exception:
            return  # a watch that cannot read this optimizer's gradients keeps the rest
        if self._pending is None:
            self._pending = self._judge()
        if _world() > 1:
            # Every rank steps in lockstep: at each step the ranks agree, and the first
            # (lowest) rank that saw an anomaly decides for all.
            if id(optimizer) != self.primary:
                return
            peer = _agree(self._pending is not None)
            if peer is None:
                return
            if self._pending is None:
                step = self.series.steps
                self._pending = _anomaly(
                    step, "rank", math.nan, f"rank {peer} saw an anomaly at step {step}"
                )
                self._pending["rank"] = peer
        if self._pending is not None:
            if self.series.anomaly is not None and self.on_hard_stop is not None:
                self.on_hard_stop()  # stopped once already, and the script went on
            self.series.anomaly = self._pending
            self.close_step()
            self.flush()
            raise StopRecording()

    def step_post(self, optimizer, args, kwargs) -> None:
        if id(optimizer) == self.primary:
            try:
                self.close_step()
            except Exception:
                self._losses, self._norms, self._nonfinite = [], [], []

    # -- per step --------------------------------------------------------------------

    def _take_grads(self, optimizer) -> None:
        if id(optimizer) == self.primary:
            lr = optimizer.param_groups[0].get("lr", math.nan)
            self._lr = float(lr) if isinstance(lr, (int, float, torch.Tensor)) else math.nan
        for group in optimizer.param_groups:
            grads = [p.grad for p in group["params"] if p.grad is not None and not p.grad.is_sparse]
            if not grads:
                self._norms.append(0.0)
                self._nonfinite.append(0)
                continue
            norm = _group_norm(grads)
            self._norms.append(norm)
            bad = 0
            if not math.isfinite(norm):
                # Rare, so paid only here: a finite norm means every element is finite.
                bad = sum(int((~torch.isfinite(g)).sum()) for g in grads)
            self._nonfinite.append(bad)

    def _loss(self) -> float:
        if not self._losses:
            return math.nan
        with self._plain():
            values = [float(t) / factor for t, factor in self._losses]
        return sum(values) / len(values)

    def _judge(self) -> dict | None:
        """The anomaly of the step so far, if it has one."""
        loss = self._loss()
        norm = math.sqrt(sum(n * n for n in self._norms))
        step = self.series.steps
        if self._losses and not math.isfinite(loss):
            return _anomaly(step, "loss_nonfinite", loss, f"loss became {loss} at step {step}")
        if any(self._nonfinite):
            count = sum(self._nonfinite)
            text = f"{count} gradient value(s) became non-finite at step {step}"
            return _anomaly(step, "grad_nonfinite", norm, text)
        if "spike" in self.series.checks:
            return self._spike(step, loss, norm)
        return None

    def _spike(self, step: int, loss: float, norm: float) -> dict | None:
        for kind, value, recent, what in (
            ("loss_spike", loss, self._recent_loss, "loss"),
            ("grad_spike", norm, self._recent_norm, "gradient norm"),
        ):
            if len(recent) < MIN_HISTORY or not math.isfinite(value):
                continue
            median = statistics.median(recent)
            if median > 0 and value > self.factor * median:
                text = (
                    f"{what} spiked to {value:.4g} at step {step}, {value / median:.1f}× the "
                    f"median {median:.4g} of the {len(recent)} steps before"
                )
                found = _anomaly(step, kind, value, text)
                found["median"] = median
                return found
        return None

    def close_step(self) -> None:
        """The primary optimizer stepped: the step's record joins the series."""
        now = time.perf_counter()
        loss = self._loss()
        norm = math.sqrt(sum(n * n for n in self._norms))
        step = self.series.steps
        s = self.series
        s.loss.append(loss)
        s.grad_norm.append(norm)
        s.lr.append(self._lr)
        s.ms.append((now - self._started) * 1e3)
        if any(self._nonfinite):
            s.nonfinite.append([step, list(self._nonfinite)])
        if self.expect is not None and self.diverged is None:
            self._compare(step, loss)
        if math.isfinite(loss):
            self._recent_loss.append(loss)
        if math.isfinite(norm):
            self._recent_norm.append(norm)
        self._losses, self._norms, self._nonfinite = [], [], []
        self._started = now
        if now - self._flushed > FLUSH_SECONDS:
            self.flush()

    def _compare(self, step: int, loss: float) -> None:
        then = self.expect["loss"]
        if step >= len(then):
            return
        before = float(then[step])
        same = (math.isnan(loss) and math.isnan(before)) or _bits(loss) == _bits(before)
        if not same:
            self.diverged = (step, loss, before)

    def flush(self) -> None:
        self._flushed = time.perf_counter()
        if self.run_dir is None:
            return
        try:
            store.write(self.run_dir, self.series)
        except OSError:
            pass  # a full disk: the series in memory is written again at the end


def _anomaly(step: int, kind: str, value: float, text: str) -> dict:
    return {"step": step, "kind": kind, "value": value, "text": text}


def _bits(x: float) -> bytes:
    import struct

    return struct.pack("<d", x)


def _group_norm(grads: list[torch.Tensor]) -> float:
    """The L2 norm of a group's gradients: one fused kernel per device and dtype."""
    try:
        norms = torch._foreach_norm(grads)
    except (RuntimeError, TypeError):
        norms = [torch.linalg.vector_norm(g) for g in grads]
    if len({n.device for n in norms}) > 1:
        norms = [n.cpu() for n in norms]
    wide = [n.double() if n.dtype != torch.float64 else n for n in norms]
    return float(torch.linalg.vector_norm(torch.stack(wide)))


def _world() -> int:
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size()


def _agree(mine: bool) -> int | None:
    """One all-reduce per step: the lowest rank that saw an anomaly, or None."""
    dist = torch.distributed
    world, rank = dist.get_world_size(), dist.get_rank()
    device = "cpu"
    if "nccl" in str(dist.get_backend()) and "cpu" not in str(dist.get_backend()):
        device = f"cuda:{torch.cuda.current_device()}"
    flag = torch.tensor([world - rank if mine else 0], dtype=torch.int64, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    top = int(flag.item())
    return None if top == 0 else world - top
