"""`tvis run --from-step N`: the script runs unobserved to its N-th step, then is recorded.

Until then tvis holds only a pair of global optimizer step hooks that count steps (and, in
a re-run after `--watch`, compare each step's loss with the watch series). After the N-th
step the recorder goes in, from inside the post-hook; torch forbids adding an optimizer hook
there, so these hooks stay and hand every later step to the recorder.
"""

from __future__ import annotations

import gc

from tvis.record.watch import Watch


class LateStart:
    """Counts optimizer steps until ``first_step``, then installs ``recorder``."""

    def __init__(self, recorder, first_step: int, check: Watch | None = None) -> None:
        self.recorder = recorder
        self.first_step = first_step
        self.check = check
        self.handles: list = []
        self.counts: dict[int, int] = {}  # id(optimizer) -> steps taken
        self.started = False  # the recorder is in

    @property
    def steps_seen(self) -> int:
        return min(self.counts.values(), default=0)

    def install(self) -> None:
        from torch.optim import optimizer as optim_module

        self.handles += [
            optim_module.register_optimizer_step_pre_hook(self._pre),
            optim_module.register_optimizer_step_post_hook(self._post),
        ]
        if self.check is not None:
            self.check.install(step_hooks=False)

    def uninstall(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        if self.check is not None:
            self.check.uninstall()

    def _pre(self, optimizer, args, kwargs) -> None:
        if self.started:
            self.recorder._step_pre(optimizer, args, kwargs)
        elif self.check is not None:
            self.check.step_pre(optimizer, args, kwargs)

    def _post(self, optimizer, args, kwargs) -> None:
        if self.started:
            self.recorder._step_post(optimizer, args, kwargs)
            return
        if self.check is not None:
            self.check.step_post(optimizer, args, kwargs)
        self.counts[id(optimizer)] = self.counts.get(id(optimizer), 0) + 1
        # Every optimizer seen has taken its N-th step (a GAN's both): the next forward
        # is step N's.
        if self.steps_seen >= self.first_step:
            self._start()

    def _start(self) -> None:
        rec = self.recorder
        self.started = True
        if self.check is not None:
            self.check.uninstall()  # its backward patch; the recorder's takes over
            self._note_check()
        rec.install(step_hooks=False)
        _note_started_loaders(rec, self.first_step)

    def _note_check(self) -> None:
        check = self.check
        if check.diverged is None:
            self.recorder.notice(
                f"the re-run matched the watch run's loss bit for bit at all "
                f"{self.first_step:,} steps before the recording.",
                level="info",
            )
            return
        step, now, then = check.diverged
        self.recorder.notice(
            f"the script is not deterministic: re-run, its loss at step {step} was {now!r} "
            f"where the watch run's was {then!r}; the recorded steps may not show the "
            "anomaly the watch run saw (fix the seeds and data order, or use "
            "torch.use_deterministic_algorithms).",
        )


def _note_started_loaders(recorder, step: int) -> None:
    """A DataLoader iterator that started its workers before step N keeps fetching in
    them: its batches are recorded as the model gets them, their transforms are not."""
    from torch.utils.data import dataloader as dl

    workers = [
        o
        for o in gc.get_objects()
        if issubclass(type(o), dl._MultiProcessingDataLoaderIter)
        and not getattr(o, "_shutdown", True)
    ]
    if workers:
        recorder.notice(
            f"recording started at step {step}, after a DataLoader started its "
            f"{workers[0]._num_workers} worker process(es): its batches are recorded as the "
            "model received them, but not its samples' fetch and transforms.",
        )
