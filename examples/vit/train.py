"""Train a tiny Vision Transformer on the procedurally drawn shapes of ../image_classifier.

Patches of 4x4 pixels become tokens, a learned [CLS] token is prepended, and the class is read
from the [CLS] token after two transformer blocks with hand-written attention.

    python train.py --steps 300
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "image_classifier"))
from shapes import ShapesDataset  # noqa: E402
from transforms import Compose, Normalize, ToTensor  # noqa: E402

MEAN = (0.35, 0.35, 0.35)
STD = (0.28, 0.28, 0.28)


class PatchEmbedding(nn.Module):
    """(B, C, H, W) -> (B, N, dim): one token per patch."""

    def __init__(self, in_channels, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch, stride=patch)

    def forward(self, images):
        x = self.proj(images)  # (B, dim, H/p, W/p)
        return x.flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).view(B, N, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # each (B, heads, N, head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        attn = torch.softmax(scores, dim=-1)
        attn = self.attn_drop(attn)
        out = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(out)


class EncoderBlock(nn.Module):
    def __init__(self, dim, heads, mlp_ratio=2, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_ratio * dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(mlp_ratio * dim, dim),
        )

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return x


class TinyViT(nn.Module):
    def __init__(self, num_classes, image_size=32, patch=4, dim=64, depth=2, heads=4):
        super().__init__()
        num_patches = (image_size // patch) ** 2
        self.patch_embed = PatchEmbedding(3, dim, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, images):
        x = self.patch_embed(images)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        x = self.blocks(x)
        x = self.norm(x)
        return self.head(x[:, 0])


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
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

    model = TinyViT(num_classes=len(train_set.classes))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    log = open(args.log, "a") if args.log else None

    step = 0
    running = 0.0
    start = time.perf_counter()
    model.train()
    while step < args.steps:
        for images, labels in train_loader:
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            loss_value = loss.item()
            if log:
                log.write(json.dumps({"batch": step, "loss": loss_value}) + "\n")
                log.flush()
            running += loss_value
            step += 1
            if step % args.print_every == 0:
                elapsed = (time.perf_counter() - start) * 1000 / step
                print(
                    f"step {step:4d}  loss {running / args.print_every:.4f}  {elapsed:.1f} ms/step"
                )
                running = 0.0
            if step >= args.steps:
                break

    print(f"validation accuracy: {evaluate(model, val_loader):.3f}")
    if log:
        log.close()


if __name__ == "__main__":
    main()
