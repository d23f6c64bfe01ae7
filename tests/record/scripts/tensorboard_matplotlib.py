"""Logs scalars and a histogram to TensorBoard and saves a matplotlib (Agg) plot of the loss, when
those packages are installed; works without them."""

import argparse
import json
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    plt = None

try:
    from torch.utils.tensorboard import SummaryWriter
except ImportError:
    SummaryWriter = None


def plot_losses(losses, path):
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(losses)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    fig.savefig(path)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--plot-every", type=int, default=2)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    log = open(args.log, "a") if args.log else None
    losses = []

    with tempfile.TemporaryDirectory() as out_dir:
        writer = SummaryWriter(log_dir=os.path.join(out_dir, "tb")) if SummaryWriter else None
        for step in range(args.steps):
            x = torch.randn(32, 8)
            loss = F.mse_loss(model(x), x[:, :2].sum(dim=1, keepdim=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            losses.append(loss.item())
            if writer:
                writer.add_scalar("train/loss", loss.item(), step)
                writer.add_histogram("fc1/weight", model[0].weight, step)
            if plt and step % args.plot_every == 0:
                plot_losses(losses, os.path.join(out_dir, "loss.png"))
            if log:
                log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
                log.flush()
        if writer:
            writer.close()


if __name__ == "__main__":
    main()
