"""Repeated forwards of a light group, counted rather than recorded.

A ``generate()`` loop runs the model hundreds of times between two steps, and an LBFGS
closure evaluates it up to 20 times per ``step()``: a light group records the first
LIGHT_REPEATS root forwards made from one line of code in full, and counts the later ones
(``dropped_sites`` entries with ``why: "repeat"``, which the call tree shows as "×N more").
While a counted forward runs tvis steps out of the way: its global module hooks leave
torch's tables (so every module inside runs torch's hook-free path), function tracing and
per-line ops are paused, and a pair of hooks on the root module alone sees it end. The
group's forward time and the calling line's count and time still include it.
"""

from __future__ import annotations

import threading

import torch
from torch.nn.modules import module as nn_module

from tvis.record.builder import LIGHT_REPEATS, BatchBuilder
from tvis.record.compiled import compiling


class Repeats:
    """The part of the Recorder that counts a light group's repeated forwards."""

    def counts_repeat(self, batch: BatchBuilder, module: torch.nn.Module, line) -> bool:
        """At the start of a light group's root forward made from ``line``: whether it is
        counted (past the first LIGHT_REPEATS from that line, or the group is full); if
        so, counting begins."""
        name = self.module_name(module)
        batch.root_repeats[(name, line)] += 1
        repeat = batch.root_repeats[(name, line)] > LIGHT_REPEATS
        if not repeat and not batch.full:
            return False
        parent = next(
            (c for c in reversed(self.stack) if c is not None and c.owner == batch.index), None
        )
        site = (name, type(module).__name__, parent.id if parent is not None else -1)
        (batch.repeat_sites if repeat else batch.dropped_sites)[site] += 1
        batch.dropped_calls += 1
        self.stack.append(None)  # keeps the stack paired, as a dropped call does
        self.counting = 1
        self._counted = (self.work.started - self.overhead, batch.lines.get(line))
        for extension in self.extensions:
            extension.pause()
        self.work.keep_lifted()  # the call hook stays off when this hook returns
        self._step_aside(module)
        return True

    def counted_exit(self, module: torch.nn.Module) -> None:
        """A module call inside a counted forward returned (tvis's global hooks stayed in
        place: another hook's table could not be changed); the root's ends the count."""
        self.counting -= 1
        if not self.counting:
            self._end_counted(module)

    def stop_counting(self) -> None:
        """A counted forward never returned through its hooks (a BaseException such as
        KeyboardInterrupt went through it): observe again, before anything else."""
        if self.counting:
            self.counting = 0
            self._end_counted(None)

    # -- stepping aside ------------------------------------------------------------------

    def _step_aside(self, module: torch.nn.Module) -> None:
        tables = (nn_module._global_forward_pre_hooks, nn_module._global_forward_hooks)
        if any(key not in table for key, table in zip(self.module_hook_ids, tables, strict=True)):
            return  # not where install put them: the global hooks count depth instead
        # Kept on the module until the group is written (registering them costs more
        # than a small forward's modules save). Hooks already there run for this call
        # too, after this one: its own entry is not a call of the root inside itself.
        self._root_entered = id(module) not in self.root_hooks
        if self._root_entered:
            self.root_hooks[id(module)] = (
                module.register_forward_pre_hook(self._root_pre),
                module.register_forward_hook(self._root_post, with_kwargs=True, always_call=True),
            )
        aside = []
        for key, table in zip(self.module_hook_ids, tables, strict=True):
            keys = list(table)
            aside.append((table, key, table.pop(key), keys[keys.index(key) + 1 :]))
        self._aside = aside

    def _step_back(self) -> None:
        """tvis's global hooks back in torch's tables, each where it was (hooks run in
        the order of their table)."""
        aside, self._aside = self._aside, None
        for table, key, hook, after in aside or ():
            table[key] = hook
            for later in after:
                if later in table:
                    table[later] = table.pop(later)

    def remove_root_hooks(self) -> None:
        """Take the hooks that see counted forwards end off their modules."""
        for handles in self.root_hooks.values():
            for handle in handles:
                handle.remove()
        self.root_hooks.clear()

    def _root_pre(self, module, args) -> None:
        if self._aside is None or compiling() or threading.get_ident() != self.thread:
            return
        if not self._root_entered:
            self._root_entered = True  # the counted call itself
        else:
            self.counting += 1  # the root module called again inside its own forward

    def _root_post(self, module, args, *rest) -> None:
        if self._aside is None or compiling() or threading.get_ident() != self.thread:
            return
        self.counting -= 1
        if not self.counting:
            self._end_counted(module)

    def _end_counted(self, module: torch.nn.Module | None) -> None:
        """The counted root forward returned (or raised): tvis observes again."""
        self._step_back()
        with self.work:
            try:
                self.open_modules = max(0, self.open_modules - 1)
                if self.stack and self.stack[-1] is None:
                    self.stack.pop()
                started, line = self._counted
                ms = (self.work.started - self.overhead - started) * 1e3
                batch = self.batch
                if batch is not None:
                    phase = "loss" if isinstance(module, torch.nn.modules.loss._Loss) else "forward"
                    batch.phase_ms[phase] = batch.phase_ms.get(phase, 0) + ms
                if line is not None:
                    line["count"] += 1
                    line["ms"] += ms
            except Exception as e:
                self.guard("counting a repeated forward", e)
        for extension in reversed(self.extensions):
            extension.resume()
        self.stack_changed()
