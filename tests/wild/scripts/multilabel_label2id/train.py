# A movie-genre tagger in the Hugging Face config's spelling: the genres are named only by
# a dict from name to index (``label2id``, its indices not in the names' order) and its
# inverse; each plot vector may carry several genres (0/1 target rows), trained with
# BCEWithLogitsLoss on raw logits.
import torch
import torch.nn as nn

label2id = {"drama": 2, "comedy": 0, "action": 1, "horror": 4, "romance": 3}
id2label = {i: name for name, i in label2id.items()}


def make_batch(generator, batch_size=8, n_features=16):
    targets = (torch.rand(batch_size, len(label2id), generator=generator) < 0.4).float()
    mixing = torch.randn(len(label2id), n_features, generator=generator)
    features = targets @ mixing + 0.3 * torch.randn(batch_size, n_features, generator=generator)
    return features, targets


if __name__ == "__main__":
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, len(label2id)))
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        features, targets = make_batch(generator)
        optimizer.zero_grad()
        logits = model(features)
        loss = criterion(logits, targets)
        loss.backward()
        optimizer.step()
        tagged = [[id2label[i] for i in row.nonzero().flatten().tolist()] for row in targets[:2]]
        print(f"step {step} loss {loss.item():.4f} first genres {tagged}")
