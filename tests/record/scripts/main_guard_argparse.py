"""Classic layout: argparse, a main() behind `if __name__ == "__main__":`, a sibling module."""

import argparse
import json

import torch
import torch.nn.functional as F
from helpers_mod import Classifier, accuracy, make_blobs
from torch.utils.data import DataLoader, TensorDataset


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", default=None)
    return parser.parse_args()


def train(args):
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    x, y = make_blobs(256, dim=8, classes=4, generator=generator)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)

    model = Classifier(8, 32, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    log = open(args.log, "a") if args.log else None

    step = 0
    while step < args.steps:
        for inputs, labels in loader:
            logits = model(inputs)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if log:
                record = {"batch": step, "loss": loss.item(), "acc": accuracy(logits, labels)}
                log.write(json.dumps(record) + "\n")
                log.flush()
            step += 1
            if step >= args.steps:
                break
    if log:
        log.close()


def main():
    train(get_args())


if __name__ == "__main__":
    main()
