"""A small CNN for 32x32 pictures."""

import torch
from torch import nn


def flatten_features(x):
    """Global average pool the last feature map and flatten it to (batch, channels)."""
    x = x.mean(dim=(2, 3))
    return torch.flatten(x, 1)


def conv_block(in_channels, out_channels):
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )


class ShapesCNN(nn.Module):
    def __init__(self, num_classes, width=16, dropout=0.2):
        super().__init__()
        self.features = nn.Sequential(
            conv_block(3, width),  # 32 -> 16
            conv_block(width, 2 * width),  # 16 -> 8
            conv_block(2 * width, 4 * width),  # 8 -> 4
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = flatten_features(x)
        x = self.dropout(x)
        return self.head(x)
