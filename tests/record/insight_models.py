"""Models and datasets for the insight tests, defined in the test tree so tvis treats them
as project code: a conv net without BatchNorm (Grad-CAM is exact per sample), a tiny
language model with its own attention, a segmentation head and a vocabulary softmax
(softmaxes that are not attention), and datasets of pictures and text."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

VOCAB = ["<pad>", "<bos>", "the", "cat", "sat", "on", "mat", "dog", "ran", "far", "a", "hat"]
PAD = 0


class Stripes(Dataset):
    """Deterministic 3×16×16 images in four classes; ``index`` is returned too."""

    classes = ["horizontal", "vertical", "diagonal", "noise"]

    def __init__(self, n: int = 64) -> None:
        g = torch.Generator().manual_seed(3)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        self.images = torch.randn(n, 3, 16, 16, generator=g) * 0.3
        for i, label in enumerate(self.labels.tolist()):
            if label == 0:
                self.images[i, :, ::4] += 1
            elif label == 1:
                self.images[i, :, :, ::4] += 1
            elif label == 2:
                self.images[i] += torch.eye(16)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.images[i], self.labels[i]


class ConvNet(nn.Module):
    """Two conv layers and a linear head; no BatchNorm, so samples never mix."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 12, 3, padding=1)
        self.head = nn.Linear(12, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(F.max_pool2d(x, 2)))
        return self.head(x.mean(dim=(2, 3)))


def conv_setup(seed: int = 0, batch_size: int = 8):
    torch.manual_seed(seed)
    model = ConvNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(Stripes(), batch_size=batch_size, shuffle=True)
    return model, opt, loader


def train_classifier(model, opt, loader, steps: int) -> None:
    done = 0
    while done < steps:
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if done == steps:
                return


class SelfAttention(nn.Module):
    """Single-head causal self-attention written out: softmax of q·kᵀ."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / math.sqrt(x.shape[-1])
        t = x.shape[1]
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        return self.out(weights @ v)


class TinyLM(nn.Module):
    """Embedding, two attention layers, a vocabulary head."""

    def __init__(self, vocab: int = len(VOCAB), dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([SelfAttention(dim), SelfAttention(dim)])
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x)


class VocabSoftmaxLM(TinyLM):
    """Returns probabilities over the vocabulary: a [B, T, V] softmax that is not attention."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits = super().forward(ids)
        return torch.softmax(logits, dim=-1)


class SegHead(nn.Module):
    """Per-pixel class probabilities [B, C, H, W] (softmax over dim 1), and a square
    [B, H, W] map softmaxed over its last dim after a 1×1 conv: neither is attention."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, classes, 1)
        self.squash = nn.Conv2d(3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(self.conv(x), dim=1)
        rows = torch.softmax(self.squash(x)[:, 0], dim=-1)
        return probs.mean() + rows.mean()


def token_batch(b: int = 4, t: int = 7, seed: int = 0):
    """Inputs and next-token targets, later positions padded with PAD."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, len(VOCAB), (b, t + 1), generator=g)
    ids[:, 0] = 1
    for row in range(b):
        ids[row, t + 1 - row :] = PAD  # row r has r padded positions
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


class Compose:
    """A project-written transform pipeline (traced as project functions)."""

    def __init__(self, stages) -> None:
        self.stages = stages

    def __call__(self, x):
        for stage in self.stages:
            x = stage(x)
        return x


class ToTensor:
    def __call__(self, picture) -> torch.Tensor:
        data = torch.frombuffer(bytearray(picture.tobytes()), dtype=torch.uint8)
        return data.view(picture.height, picture.width, 3).permute(2, 0, 1).float() / 255


class Normalize:
    def __init__(self, mean, std) -> None:
        self.mean, self.std = mean, std

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        mean = torch.tensor(self.mean).view(-1, 1, 1)
        std = torch.tensor(self.std).view(-1, 1, 1)
        return (x - mean) / std


class Pictures(Dataset):
    """PIL pictures drawn per item, through a project Compose; returns (image, label, index)."""

    classes = ["red", "green"]

    def __init__(self, n: int = 24) -> None:
        self.transform = Compose([ToTensor(), Normalize([0.5, 0.4, 0.3], [0.2, 0.2, 0.2])])
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int):
        from PIL import Image

        label = index % 2
        colour = (200, 30, 30) if label == 0 else (30, 200, 30)
        picture = Image.new("RGB", (8, 8), colour)
        return self.transform(picture), label, index


class PictureNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.conv(x)).mean(dim=(2, 3)))


class Brighten(nn.Module):
    """A transform written as an nn.Module, applied to one item at a time."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1.5


class ModuleTransformed(Stripes):
    """Stripes whose items pass through an nn.Module transform: a [3, 16, 16] item must
    not be taken for a batch of 3."""

    def __init__(self) -> None:
        super().__init__()
        self.transform = Brighten()

    def __getitem__(self, i: int):
        image, label = super().__getitem__(i)
        return self.transform(image), label
