"""A procedurally drawn "shapes" dataset: 32x32 RGB pictures of one shape each.

Every image is drawn on the fly from its index with its own seeded RNG, so the dataset is the
same whatever the number of DataLoader workers or the order the samples are asked for.
"""

import math
import random

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ("circle", "square", "triangle", "cross", "star")


def _regular_polygon(cx, cy, radius, sides, rotation):
    return [
        (
            cx + radius * math.cos(rotation + 2 * math.pi * k / sides),
            cy + radius * math.sin(rotation + 2 * math.pi * k / sides),
        )
        for k in range(sides)
    ]


def _star(cx, cy, radius, rotation, points=5):
    outline = []
    for k in range(2 * points):
        r = radius if k % 2 == 0 else radius * 0.45
        angle = rotation + math.pi * k / points
        outline.append((cx + r * math.cos(angle), cy + r * math.sin(angle)))
    return outline


def _random_colour(rng, low, high):
    return tuple(rng.randint(low, high) for _ in range(3))


def draw_shape(label, rng, size=32):
    """Draw shape number `label` at a random place, size and colour; return a PIL image."""
    background = _random_colour(rng, 0, 110)
    foreground = _random_colour(rng, 120, 255)
    image = Image.new("RGB", (size, size), background)
    draw = ImageDraw.Draw(image)

    radius = rng.uniform(size * 0.18, size * 0.36)
    cx = rng.uniform(radius + 1, size - radius - 1)
    cy = rng.uniform(radius + 1, size - radius - 1)
    rotation = rng.uniform(0, 2 * math.pi)
    name = CLASSES[label]

    if name == "circle":
        draw.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), fill=foreground)
    elif name == "square":
        draw.polygon(_regular_polygon(cx, cy, radius, 4, rotation), fill=foreground)
    elif name == "triangle":
        draw.polygon(_regular_polygon(cx, cy, radius, 3, rotation), fill=foreground)
    elif name == "cross":
        width = max(2, int(radius * 0.5))
        dx, dy = radius * math.cos(rotation), radius * math.sin(rotation)
        draw.line((cx - dx, cy - dy, cx + dx, cy + dy), fill=foreground, width=width)
        draw.line((cx + dy, cy - dx, cx - dy, cy + dx), fill=foreground, width=width)
    elif name == "star":
        draw.polygon(_star(cx, cy, radius, rotation), fill=foreground)

    # Sensor noise, so that no two pictures of the same shape are alike.
    pixels = np.asarray(image, dtype=np.float32)
    noise = np.random.default_rng(rng.getrandbits(32)).normal(0.0, 12.0, pixels.shape)
    pixels = np.clip(pixels + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels, mode="RGB")


class ShapesDataset:
    """`length` pictures of shapes; `dataset[i]` is `(transform(image), label)`."""

    classes = list(CLASSES)

    def __init__(self, length=4096, seed=0, transform=None, size=32):
        self.length = length
        self.seed = seed
        self.transform = transform
        self.size = size

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        rng = random.Random(self.seed * 1_000_003 + index)
        label = index % len(self.classes)
        image = draw_shape(label, rng, self.size)
        if self.transform is not None:
            image = self.transform(image)
        return image, label
