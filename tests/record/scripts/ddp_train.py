"""A small data-parallel training script that knows nothing of tvis (gloo, CPU).

Each rank logs, from an optimizer step hook, its loss and a digest of every parameter
after each step to ``<log>/rank<N>.jsonl``, so runs with and without tvis compare exactly.
"""

import argparse
import hashlib
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Net(nn.Module):
    def __init__(self, unused: bool, spare_on_rank0: bool) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
        self.spare = nn.Linear(6, 3) if unused else None  # never called, or on rank 0 only
        self.use_spare = spare_on_rank0 and dist.get_rank() == 0

    def forward(self, x):
        out = self.body(x)
        return out + self.spare(x) if self.use_spare else out


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--journal", type=Path, required=True)
    p.add_argument("--mode", choices=["ddp", "manual"], default="ddp")
    p.add_argument("--sampler", choices=["distributed", "none"], default="distributed")
    p.add_argument("--unused", action="store_true")
    p.add_argument("--spare-on-rank0", action="store_true", help="the unused layer runs on rank 0")
    p.add_argument("--raise-at", type=int, default=-1, help="rank 1 raises before this step")
    p.add_argument("--nan-at", type=int, default=-1, help="rank 1's batch holds a NaN at this step")
    p.add_argument("--skip-reduce", default="", help="manual mode: a parameter not averaged")
    p.add_argument(
        "--accumulate-rank1",
        type=int,
        default=1,
        help="rank 1 steps every this many batches (each backward still all-reduces)",
    )
    p.add_argument("--batches", type=int, default=0, help="train this many batches (not --steps)")
    return p.parse_args()


def params_digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()


def main() -> None:
    args = parse()
    if "RANK" not in os.environ and "SLURM_PROCID" in os.environ:  # started by srun
        os.environ["RANK"] = os.environ["SLURM_PROCID"]
        os.environ["WORLD_SIZE"] = os.environ["SLURM_NTASKS"]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 6), torch.randint(0, 3, (96,)))
    sampler = DistributedSampler(data, seed=0) if args.sampler == "distributed" else None
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    net = Net(args.unused, args.spare_on_rank0)
    model = net
    if args.mode == "ddp":
        model = nn.parallel.DistributedDataParallel(net, find_unused_parameters=args.unused)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    args.journal.mkdir(parents=True, exist_ok=True)
    log = open(args.journal / f"rank{rank}.jsonl", "w")
    state = {"step": 0, "loss": None}

    def after_step(optimizer, *_):
        line = {"step": state["step"], "loss": state["loss"], "params": params_digest(net)}
        log.write(json.dumps(line) + "\n")
        log.flush()
        state["step"] += 1

    opt.register_step_post_hook(after_step)
    every = args.accumulate_rank1 if rank == 1 else 1
    epoch = batches = 0

    def more() -> bool:  # the same count on every rank, so all meet the same collectives
        return batches < args.batches if args.batches else state["step"] < args.steps

    while more():
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in loader:
            if rank == 1 and state["step"] == args.raise_at:
                raise RuntimeError(f"rank 1 gave up at step {args.raise_at}")
            if rank == 1 and state["step"] == args.nan_at:
                x = x.clone()
                x[0, 0] = float("nan")
            loss = nn.functional.cross_entropy(model(x), y)
            if batches % every == 0:
                opt.zero_grad()
            loss.backward()
            if args.mode == "manual":
                for name, p in net.named_parameters():
                    if p.grad is not None and name != args.skip_reduce:
                        dist.all_reduce(p.grad)
                        p.grad /= world
            state["loss"] = loss.item()
            batches += 1
            if batches % every == 0:
                opt.step()
            if not more():
                break
        epoch += 1
    log.close()
    # Tear down while every rank is still here and nothing holds the group: a DDP wrapper
    # left alive keeps gloo's threads running into interpreter exit, which can abort.
    dist.barrier()
    del model
    dist.destroy_process_group()
    print(f"rank {rank} done ({os.getpid()})")


if __name__ == "__main__":
    main()
