"""Sine-wave sequence prediction with two LSTMCells fitted by LBFGS, in the style of PyTorch's
time_sequence_prediction example: each optimizer.step(closure) runs up to 20 forward/backward
passes, and after each step the model predicts the future under no_grad.

    python lbfgs_fit.py --steps 3
"""

import argparse
import json

import numpy as np
import torch
from torch import nn


def make_waves(n=40, length=200, period=20, seed=2):
    rng = np.random.RandomState(seed)
    x = np.arange(length) + rng.randint(-4 * period, 4 * period, n).reshape(n, 1)
    return np.sin(x / period).astype("float64")


class Sequence(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        n = input.size(0)
        h_t = torch.zeros(n, self.hidden, dtype=torch.double)
        c_t = torch.zeros(n, self.hidden, dtype=torch.double)
        h_t2 = torch.zeros(n, self.hidden, dtype=torch.double)
        c_t2 = torch.zeros(n, self.hidden, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):  # feed the prediction back in
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10, help="LBFGS steps")
    parser.add_argument("--length", type=int, default=40, help="timesteps per training wave")
    parser.add_argument("--future", type=int, default=25)
    parser.add_argument("--log", default=None, help="append one JSON line per step here")
    args = parser.parse_args()

    np.random.seed(0)
    torch.manual_seed(0)
    data = make_waves(length=args.length + 1)
    input = torch.from_numpy(data[4:, :-1])
    target = torch.from_numpy(data[4:, 1:])
    test_input = torch.from_numpy(data[:4, :-1])
    test_target = torch.from_numpy(data[:4, 1:])

    seq = Sequence().double()
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
    log = open(args.log, "a") if args.log else None

    for i in range(args.steps):

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            loss.backward()
            return loss

        loss = optimizer.step(closure)

        with torch.no_grad():
            pred = seq(test_input, future=args.future)
            test_loss = criterion(pred[:, : -args.future], test_target)
        print(f"step {i}: loss {loss.item():.6f}, test loss {test_loss.item():.6f}")
        if log:
            record = {"step": i, "loss": loss.item(), "test_loss": test_loss.item()}
            log.write(json.dumps(record) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
