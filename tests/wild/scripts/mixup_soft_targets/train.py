# timm-style Mixup / CutMix producing soft targets (one-hot mixed and smoothed), and
# SoftTargetCrossEntropy as timm writes it: -(target * log_softmax).sum(-1).mean().
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def one_hot(x, num_classes, on_value=1.0, off_value=0.0):
    x = x.long().view(-1, 1)
    return torch.full((x.size()[0], num_classes), off_value, device=x.device).scatter_(
        1, x, on_value
    )


def mixup_target(target, num_classes, lam=1.0, smoothing=0.0):
    off_value = smoothing / num_classes
    on_value = 1.0 - smoothing + off_value
    y1 = one_hot(target, num_classes, on_value=on_value, off_value=off_value)
    y2 = one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value)
    return y1 * lam + y2 * (1.0 - lam)


def rand_bbox(img_shape, lam):
    ratio = np.sqrt(1 - lam)
    img_h, img_w = img_shape[-2:]
    cut_h, cut_w = int(img_h * ratio), int(img_w * ratio)
    cy = np.random.randint(0 + cut_h // 2, img_h - cut_h // 2)
    cx = np.random.randint(0 + cut_w // 2, img_w - cut_w // 2)
    return cy - cut_h // 2, cy + cut_h // 2, cx - cut_w // 2, cx + cut_w // 2


class Mixup:
    def __init__(
        self,
        mixup_alpha=0.8,
        cutmix_alpha=1.0,
        switch_prob=0.5,
        label_smoothing=0.1,
        num_classes=10,
    ):
        self.mixup_alpha = mixup_alpha
        self.cutmix_alpha = cutmix_alpha
        self.switch_prob = switch_prob
        self.label_smoothing = label_smoothing
        self.num_classes = num_classes

    def __call__(self, x, target):
        use_cutmix = np.random.rand() < self.switch_prob
        if use_cutmix:
            lam = np.random.beta(self.cutmix_alpha, self.cutmix_alpha)
            yl, yh, xl, xh = rand_bbox(x.shape, lam)
            x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
            lam = 1.0 - (yh - yl) * (xh - xl) / float(x.shape[-2] * x.shape[-1])
        else:
            lam = float(np.random.beta(self.mixup_alpha, self.mixup_alpha))
            x_flipped = x.flip(0).mul_(1.0 - lam)
            x.mul_(lam).add_(x_flipped)
        target = mixup_target(target, self.num_classes, lam, self.label_smoothing)
        return x, target


class SoftTargetCrossEntropy(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1)
        return loss.mean()


class Net(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.head(self.pool(self.features(x)).flatten(1))


np.random.seed(0)
torch.manual_seed(0)
images = torch.randn(64, 3, 16, 16)
labels = torch.randint(0, 10, (64,))
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(images, labels), batch_size=16, shuffle=True, drop_last=True
)
model = Net()
mixup_fn = Mixup(num_classes=10)
train_loss_fn = SoftTargetCrossEntropy()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for batch_idx, (input, target) in enumerate(loader):
    input, target = mixup_fn(input, target)
    output = model(input)
    loss = train_loss_fn(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"Train: [{batch_idx}/{len(loader)}] Loss: {loss.item():#.3g}")
