"""A tiny torchvision-style transform pipeline: Compose, ToTensor and Normalize."""

import numpy as np
import torch


class Compose:
    """Apply `transforms` one after the other."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for transform in self.transforms:
            x = transform(x)
        return x

    def __repr__(self):
        inner = ", ".join(repr(t) for t in self.transforms)
        return f"Compose([{inner}])"


class ToTensor:
    """PIL image (H, W, C) uint8 -> float tensor (C, H, W) in [0, 1]."""

    def __call__(self, image):
        array = np.array(image, dtype=np.uint8, copy=True)
        if array.ndim == 2:
            array = array[:, :, None]
        return torch.from_numpy(array).permute(2, 0, 1).contiguous().float().div(255.0)

    def __repr__(self):
        return "ToTensor()"


class Normalize:
    """Per-channel (x - mean) / std."""

    def __init__(self, mean, std):
        self.mean = tuple(mean)
        self.std = tuple(std)

    def __call__(self, tensor):
        mean = torch.tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return (tensor - mean) / std

    def __repr__(self):
        return f"Normalize(mean={self.mean}, std={self.std})"
