# A tabular multi-task model written Lightning-style (training_step returns a dict with
# "loss"), driven by a hand-written loop: a shared trunk run through
# torch.utils.checkpoint, a classification head (CrossEntropyLoss) and a regression
# head predicting a mean and a variance (GaussianNLLLoss), their losses kept in a dict
# and summed with sum(losses.values()).
import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from torch.utils.data import DataLoader, TensorDataset


class MultiTaskModel(nn.Module):
    def __init__(self, n_features=12, hidden=32, n_classes=4):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
        )
        self.cls_head = nn.Linear(hidden, n_classes)
        self.reg_head = nn.Linear(hidden, 2)
        self.ce = nn.CrossEntropyLoss()
        self.gnll = nn.GaussianNLLLoss()
        self.loss_weights = {"cls": 1.0, "reg": 0.5}

    def forward(self, x):
        h = cp.checkpoint(self.trunk, x, use_reentrant=False)
        mean, log_var = self.reg_head(h).unbind(-1)
        return self.cls_head(h), mean, log_var.exp()

    def training_step(self, batch, batch_idx):
        x, y_cls, y_reg = batch
        logits, mean, var = self(x)
        losses = {
            "cls": self.loss_weights["cls"] * self.ce(logits, y_cls),
            "reg": self.loss_weights["reg"] * self.gnll(mean, y_reg, var),
        }
        loss = sum(losses.values())
        return {"loss": loss, "log": {k: v.detach() for k, v in losses.items()}}

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=3e-3)


torch.manual_seed(0)
X = torch.randn(160, 12)
y_cls = (X[:, 0] > 0).long() + 2 * (X[:, 1] > 0).long()
y_reg = X[:, 2] * 3 + 0.5 * torch.randn(160)
loader = DataLoader(TensorDataset(X, y_cls, y_reg), batch_size=20, shuffle=True)
model = MultiTaskModel()
optimizer = model.configure_optimizers()
for _epoch in range(1):
    model.train()
    for batch_idx, batch in enumerate(loader):
        out = model.training_step(batch, batch_idx)
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()
        logs = " ".join(f"{k}={v.item():.3f}" for k, v in out["log"].items())
        print(f"batch {batch_idx}: loss={out['loss'].item():.3f} {logs}")
