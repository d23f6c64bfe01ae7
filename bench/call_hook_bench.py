"""What the call hook alone costs a training step: no hook, settrace, sys.monitoring.

A small MLP's forward, backward and optimizer step (torch.nn's and torch.optim's Python
code: library frames the hook refuses) inside one project function the hook accepts,
timed with each backend started on this thread and ``on_call`` doing nothing. Thread CPU
time (torch on one intra-op thread), which other processes on a shared machine disturb far
less than wall time. Rounds alternate the arms; the figure is the median over rounds of
each round's median step.

    python bench/call_hook_bench.py [--rounds 7] [--steps 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from tvis.record.call_hook import MonitoringHook, SettraceHook


def train_step(model, opt, x):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def _wants(code) -> bool:
    return code.co_name == "train_step" and code.co_filename == __file__


def _on_call(frame):
    return _ignore


def _ignore(value) -> None:
    pass


def _time(arm, steps: int) -> float:
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(32, 32), torch.nn.LayerNorm(32), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(8, 32)
    hook = arm(_wants, _on_call) if arm else None
    if hook:
        hook.start()
    try:
        times = []
        for _ in range(steps):
            start = time.thread_time()
            train_step(model, opt, x)
            times.append(time.thread_time() - start)
    finally:
        if hook:
            hook.stop()
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    arms = {"none": None, "settrace": SettraceHook}
    if sys.version_info >= (3, 12):
        arms["monitoring"] = MonitoringHook
    _time(None, args.steps)  # warm-up: first calls, lazy imports
    got: dict[str, list[float]] = {name: [] for name in arms}
    for round_ in range(args.rounds):
        names = list(arms) if round_ % 2 == 0 else list(arms)[::-1]
        for name in names:
            got[name].append(_time(arms[name], args.steps))
    print(f"Python {sys.version.split()[0]}, CPU ms per step, median of {args.rounds} rounds")
    base = statistics.median(got["none"])
    for name, values in got.items():
        ms = statistics.median(values)
        print(f"{name:11} {ms:7.3f}  ×{ms / base:5.2f}  [{min(values):.3f}–{max(values):.3f}]")


if __name__ == "__main__":
    main()
