"""projects/chargpt in the style of minGPT: the model and trainer come from the `mingpt`
package at the repository root (installed editable, or on PYTHONPATH); a CharDataset
holding stoi/itos dicts."""

import torch
from mingpt.model import GPT
from mingpt.trainer import Trainer
from torch.utils.data import Dataset


class CharDataset(Dataset):
    def __init__(self, data, block_size):
        chars = sorted(list(set(data)))
        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.itos = {i: ch for i, ch in enumerate(chars)}
        self.vocab_size, self.block_size, self.data = len(chars), block_size, data

    def get_vocab_size(self):
        return self.vocab_size

    def __len__(self):
        return len(self.data) - self.block_size

    def __getitem__(self, idx):
        chunk = self.data[idx : idx + self.block_size + 1]
        dix = [self.stoi[s] for s in chunk]
        return torch.tensor(dix[:-1], dtype=torch.long), torch.tensor(dix[1:], dtype=torch.long)


class TrainConfig:
    learning_rate, batch_size, max_iters, grad_norm_clip = 5e-4, 8, 40, 1.0


if __name__ == "__main__":
    torch.manual_seed(3407)
    text = "to be, or not to be, that is the question. " * 30
    train_dataset = CharDataset(text, block_size=16)
    config = GPT.get_default_config()
    config.vocab_size = train_dataset.get_vocab_size()
    config.block_size = train_dataset.block_size
    model = GPT(config)
    Trainer(TrainConfig(), model, train_dataset).run()
