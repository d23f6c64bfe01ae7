"""Train a small CNN to tell circles, squares, triangles, crosses and stars apart.

The pictures are drawn procedurally (see shapes.py), so nothing is downloaded:

    python train.py --steps 300
    python train.py --workers 0 --accum 2 --log losses.jsonl
"""

import argparse
import json
import time

import torch
import torch.nn.functional as F
from model import ShapesCNN
from shapes import ShapesDataset
from torch.utils.data import DataLoader
from transforms import Compose, Normalize, ToTensor

MEAN = (0.35, 0.35, 0.35)
STD = (0.28, 0.28, 0.28)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps to train for")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--accum", type=int, default=1, help="batches per optimizer step")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", default=None, help="append one JSON line per batch here")
    parser.add_argument("--print-every", type=int, default=50)
    return parser.parse_args()


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct = total = 0
    for images, labels in loader:
        correct += (model(images).argmax(dim=1) == labels).sum().item()
        total += labels.numel()
    model.train()
    return correct / total


def main():
    args = parse_args()
    torch.manual_seed(args.seed)

    transform = Compose([ToTensor(), Normalize(MEAN, STD)])
    train_set = ShapesDataset(length=4096, seed=args.seed, transform=transform)
    val_set = ShapesDataset(length=500, seed=args.seed + 1, transform=transform)
    train_loader = DataLoader(
        train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers
    )
    val_loader = DataLoader(val_set, batch_size=100, num_workers=0)

    model = ShapesCNN(num_classes=len(train_set.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    log = open(args.log, "a") if args.log else None

    step = batch = 0
    running = 0.0
    start = time.perf_counter()
    model.train()
    optimizer.zero_grad()
    while step < args.steps:
        for images, labels in train_loader:
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            (loss / args.accum).backward()

            loss_value = loss.item()
            if log:
                log.write(json.dumps({"batch": batch, "loss": loss_value}) + "\n")
                log.flush()
            running += loss_value
            batch += 1

            if batch % args.accum == 0:
                optimizer.step()
                optimizer.zero_grad()
                step += 1
                if step % args.print_every == 0:
                    elapsed = (time.perf_counter() - start) * 1000 / step
                    print(
                        f"step {step:4d}  loss {running / (args.print_every * args.accum):.4f}"
                        f"  {elapsed:.1f} ms/step"
                    )
                    running = 0.0
                if step >= args.steps:
                    break

    print(f"validation accuracy: {evaluate(model, val_loader):.3f}")
    if log:
        log.close()


if __name__ == "__main__":
    main()
