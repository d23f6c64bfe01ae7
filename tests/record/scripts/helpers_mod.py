"""Helpers imported by main_guard_argparse.py as a sibling module."""

import torch
from torch import nn


def make_blobs(n, dim, classes, generator):
    """Gaussian blobs: one centre per class, labels cycling through the classes."""
    centres = torch.randn(classes, dim, generator=generator) * 3
    labels = torch.arange(n) % classes
    points = centres[labels] + torch.randn(n, dim, generator=generator)
    return points, labels


def standardize(x, eps=1e-5):
    """Zero mean, unit variance per feature (a project function called inside forward)."""
    return (x - x.mean(dim=0, keepdim=True)) / (x.std(dim=0, keepdim=True) + eps)


class Classifier(nn.Module):
    def __init__(self, dim, hidden, classes):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(standardize(x))


def accuracy(logits, labels):
    return (logits.argmax(dim=1) == labels).float().mean().item()
