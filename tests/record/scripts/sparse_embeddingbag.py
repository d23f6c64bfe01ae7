"""A bag-of-items recommender: EmbeddingBag(sparse=True) trained with SparseAdam, the dense
layers with Adam (two optimizers stepped together)."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn

num_users, num_items, dim = 40, 200, 16


def make_batch(batch_size, generator):
    """Each user's history is a variable-length bag of item ids; predict a click on a candidate."""
    lengths = torch.randint(1, 8, (batch_size,), generator=generator)
    items = torch.randint(0, num_items, (int(lengths.sum()),), generator=generator)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    users = torch.randint(0, num_users, (batch_size,), generator=generator)
    candidates = torch.randint(0, num_items, (batch_size,), generator=generator)
    # Clicked if the candidate shares its "genre" (id % 5) with most of the history.
    genres = torch.zeros(batch_size, 5)
    genres.index_add_(
        0,
        torch.repeat_interleave(torch.arange(batch_size), lengths),
        F.one_hot(items % 5, 5).float(),
    )
    clicked = (genres.argmax(dim=1) == candidates % 5).float()
    return users, items, offsets, candidates, clicked


class Recommender(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = nn.EmbeddingBag(num_items, dim, mode="mean", sparse=True)
        self.candidate = nn.Embedding(num_items, dim, sparse=True)
        self.user = nn.Embedding(num_users, dim, sparse=True)
        self.mlp = nn.Sequential(nn.Linear(3 * dim, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, users, items, offsets, candidates):
        features = torch.cat(
            [self.user(users), self.history(items, offsets), self.candidate(candidates)], dim=1
        )
        return self.mlp(features).squeeze(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = Recommender()
    sparse_params = [p for name, p in model.named_parameters() if not name.startswith("mlp.")]
    sparse_opt = torch.optim.SparseAdam(sparse_params, lr=1e-2)
    dense_opt = torch.optim.Adam(model.mlp.parameters(), lr=1e-2)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        users, items, offsets, candidates, clicked = make_batch(32, generator)
        logits = model(users, items, offsets, candidates)
        loss = F.binary_cross_entropy_with_logits(logits, clicked)
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
