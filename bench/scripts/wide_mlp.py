"""A wide MLP of about 38M parameters trained with Adam on random data: the model of the
recording memory and size figures (issue 16). Four 3072×3072 layers and a classifier.

    python wide_mlp.py --steps 3 [--device cuda]

On a GPU each step also prints torch.cuda.max_memory_allocated (compare plain and
`tvis run` for the recorder's device-memory cost).
"""

import argparse
import json

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--width", type=int, default=3072)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--log", default=None, help="append one JSON line per step here")
    args = parser.parse_args()

    torch.manual_seed(0)
    w = args.width
    model = nn.Sequential(
        nn.Linear(w, w), nn.ReLU(),
        nn.Linear(w, w), nn.ReLU(),
        nn.Linear(w, w), nn.ReLU(),
        nn.Linear(w, w), nn.ReLU(),
        nn.Linear(w, 10),
    ).to(args.device)  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    log = open(args.log, "a") if args.log else None
    for step in range(args.steps):
        x = torch.randn(args.batch, w, device=args.device)
        y = torch.randint(0, 10, (args.batch,), device=args.device)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        peak = ""
        if args.device.startswith("cuda"):
            peak = f", peak device memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MB"
        print(f"step {step}: loss {loss.item():.4f}{peak}", flush=True)
        if log:
            log.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
