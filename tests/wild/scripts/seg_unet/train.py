import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
args = p.parse_args()


def block(i, o):
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, n_classes=5):
        super().__init__()
        self.d1, self.d2 = block(3, 16), block(16, 32)
        self.mid = block(32, 32)
        self.u2, self.u1 = block(64, 16), block(32, 16)
        self.head = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(F.max_pool2d(a, 2))
        m = self.mid(F.max_pool2d(b, 2))
        u = self.u2(torch.cat([F.interpolate(m, scale_factor=2), b], 1))
        u = self.u1(torch.cat([F.interpolate(u, scale_factor=2), a], 1))
        return self.head(u)


def make_batch(n=8, size=32):
    x = torch.rand(n, 3, size, size)
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    masks = []
    for i in range(n):
        cx, cy, r = torch.randint(8, 24, (3,)).tolist()
        m = ((xx - cx) ** 2 + (yy - cy) ** 2 < (r // 2) ** 2).long() * (i % 4 + 1)
        masks.append(m)
    y = torch.stack(masks)
    x[:, 0] += (y > 0).float()
    return x, y


torch.manual_seed(0)
model = UNet()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
crit = nn.CrossEntropyLoss(ignore_index=255)
for epoch in range(args.epochs):
    for it in range(5):
        x, y = make_batch()
        y[:, :2, :] = 255  # an unlabeled border
        out = model(x)
        loss = crit(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(epoch, it, loss.item())
