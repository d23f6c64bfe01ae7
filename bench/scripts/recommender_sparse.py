"""A DLRM-style click-through recommender: categorical features through EmbeddingBag(sparse=True)
tables (multi-hot, with offsets), dense features through a bottom MLP, pairwise dot-product
interactions, a top MLP; sparse tables on SparseAdam, dense layers on Adam.

    python recommender_sparse.py --steps 3
"""

import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

TABLE_SIZES = [1000, 500, 200, 50]  # user, item, category, device
NUM_DENSE = 8


class SyntheticClicks(Dataset):
    """Impressions with multi-hot categorical features, labelled by a hidden "true" model."""

    def __init__(self, length, seed=0, dim=8):
        g = torch.Generator().manual_seed(seed)
        self.dense = torch.randn(length, NUM_DENSE, generator=g)
        self.bags = []  # per table: (flat ids, offsets with a final end offset)
        for size in TABLE_SIZES:
            lengths = torch.randint(1, 4, (length,), generator=g)
            ids = torch.randint(0, size, (int(lengths.sum()),), generator=g)
            self.bags.append(
                (ids, torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]))
            )

        true_tables = [torch.randn(n, dim, generator=g) for n in TABLE_SIZES]
        true_dense = torch.randn(NUM_DENSE, dim, generator=g) / NUM_DENSE**0.5
        pooled = [
            F.embedding_bag(ids, table, offsets[:-1], mode="mean")
            for (ids, offsets), table in zip(self.bags, true_tables, strict=True)
        ]
        user = pooled[0] + self.dense @ true_dense
        item = pooled[1] + pooled[2] + pooled[3]
        p = torch.sigmoid((user * item).sum(dim=1))
        self.labels = (torch.rand(length, generator=g) < p).float()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        sparse = [ids[offsets[index] : offsets[index + 1]] for ids, offsets in self.bags]
        return self.dense[index], sparse, self.labels[index]


def collate(samples):
    dense = torch.stack([s[0] for s in samples])
    indices, offsets = [], []
    for table in range(len(TABLE_SIZES)):
        bags = [s[1][table] for s in samples]
        lengths = torch.tensor([len(b) for b in bags])
        indices.append(torch.cat(bags))
        offsets.append(torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]]))
    labels = torch.stack([s[2] for s in samples])
    return dense, indices, offsets, labels


def mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def interact(features):
    """Pairwise dot products between feature vectors (upper triangle) plus the dense vector."""
    T = torch.stack(features, dim=1)  # (B, F, D)
    Z = torch.bmm(T, T.transpose(1, 2))  # (B, F, F)
    i, j = torch.triu_indices(T.shape[1], T.shape[1], offset=1)
    return torch.cat([features[0], Z[:, i, j]], dim=1)


class DLRM(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embeddings = nn.ModuleList(
            nn.EmbeddingBag(n, dim, mode="sum", sparse=True) for n in TABLE_SIZES
        )
        self.bottom = mlp([NUM_DENSE, 64, dim])
        num_features = len(TABLE_SIZES) + 1
        self.top = mlp([dim + num_features * (num_features - 1) // 2, 64, 1])

    def forward(self, dense, indices, offsets):
        x = self.bottom(dense)
        ly = [
            emb(idx, off) for emb, idx, off in zip(self.embeddings, indices, offsets, strict=True)
        ]
        return self.top(interact([x] + ly)).squeeze(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps to run")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--print-every", type=int, default=50)
    parser.add_argument("--log", default=None, help="append one JSON line per step here")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    dataset = SyntheticClicks(length=20_000, seed=args.seed)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        collate_fn=collate,
    )
    model = DLRM()
    sparse_opt = torch.optim.SparseAdam(list(model.embeddings.parameters()), lr=3e-2)
    dense_params = list(model.bottom.parameters()) + list(model.top.parameters())
    dense_opt = torch.optim.Adam(dense_params, lr=3e-3)
    log = open(args.log, "a") if args.log else None

    step, running, start = 0, 0.0, time.time()
    while step < args.steps:
        for dense, indices, offsets, labels in loader:
            logits = model(dense, indices, offsets)
            loss = F.binary_cross_entropy_with_logits(logits, labels)
            sparse_opt.zero_grad()
            dense_opt.zero_grad()
            loss.backward()
            sparse_opt.step()
            dense_opt.step()

            if log:
                log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
                log.flush()
            running += loss.item()
            step += 1
            if step % args.print_every == 0:
                ms = (time.time() - start) / step * 1000
                print(f"step {step}: loss {running / args.print_every:.4f} ({ms:.0f} ms/step)")
                running = 0.0
            if step >= args.steps:
                break


if __name__ == "__main__":
    main()
