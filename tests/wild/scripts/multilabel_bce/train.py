# A multi-label tagging notebook's shape: each sample may carry several of C tags at
# once (targets are 0/1 vectors of shape (B, C)), the model ends in raw logits,
# nn.BCEWithLogitsLoss trains it, and predictions are sigmoid(logits) > 0.5.
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

TAGS = ["sky", "water", "tree", "person", "car", "animal"]


class TagDataset(Dataset):
    def __init__(self, n=64, n_features=20, seed=0):
        rng = np.random.default_rng(seed)
        self.labels = (rng.random((n, len(TAGS))) < 0.35).astype(np.float32)
        mixing = rng.normal(size=(len(TAGS), n_features)).astype(np.float32)
        noise = rng.normal(scale=0.5, size=(n, n_features)).astype(np.float32)
        self.features = self.labels @ mixing + noise

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return torch.from_numpy(self.features[idx]), torch.from_numpy(self.labels[idx])


class MultiLabelNet(nn.Module):
    def __init__(self, n_features=20, n_classes=len(TAGS)):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_features, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, n_classes)
        )

    def forward(self, x):
        return self.net(x)


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(TagDataset(), batch_size=8, shuffle=True)
    model = MultiLabelNet()
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        model.train()
        for i, (inputs, labels) in enumerate(loader):
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            preds = (torch.sigmoid(outputs) > 0.5).float()
            f1_hits = (preds * labels).sum().item()
            print(f"epoch {epoch} batch {i} loss {loss.item():.4f} hits {f1_hits:.0f}")
            if i == 2:
                break
