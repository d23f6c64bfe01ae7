"""No nn.Module, no optimizer: raw weight tensors, a hand-written forward and manual SGD
updates under no_grad with `p.grad = None` (makemore style)."""

import argparse
import json

import torch
import torch.nn.functional as F


def init_params(generator, n_in=10, n_hidden=32, n_out=3):
    W1 = torch.randn(n_in, n_hidden, generator=generator) * (5 / 3) / n_in**0.5
    b1 = torch.zeros(n_hidden)
    W2 = torch.randn(n_hidden, n_out, generator=generator) * 0.1
    b2 = torch.zeros(n_out)
    params = [W1, b1, W2, b2]
    for p in params:
        p.requires_grad = True
    return params


def forward(params, x):
    W1, b1, W2, b2 = params
    h = torch.tanh(x @ W1 + b1)
    return h @ W2 + b2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    g = torch.Generator().manual_seed(2147483647)
    params = init_params(g)
    X = torch.randn(200, 10, generator=g)
    Y = (X[:, :3].argmax(dim=1)).long()
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        ix = torch.randint(0, X.shape[0], (32,), generator=g)
        logits = forward(params, X[ix])
        loss = F.cross_entropy(logits, Y[ix])

        for p in params:
            p.grad = None
        loss.backward()

        with torch.no_grad():
            for p in params:
                p -= args.lr * p.grad
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
