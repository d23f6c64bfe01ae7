# minGPT's chargpt style: a CharDataset holding stoi/itos dicts with get_vocab_size(), a
# model that computes its own loss, and a Trainer class running the loop.
import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


class CharDataset(Dataset):
    def __init__(self, data, block_size):
        chars = sorted(list(set(data)))
        data_size, vocab_size = len(data), len(chars)
        print(f"data has {data_size} characters, {vocab_size} unique.")
        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.itos = {i: ch for i, ch in enumerate(chars)}
        self.vocab_size = vocab_size
        self.block_size = block_size
        self.data = data

    def get_vocab_size(self):
        return self.vocab_size

    def get_block_size(self):
        return self.block_size

    def __len__(self):
        return len(self.data) - self.block_size

    def __getitem__(self, idx):
        chunk = self.data[idx : idx + self.block_size + 1]
        dix = [self.stoi[s] for s in chunk]
        x = torch.tensor(dix[:-1], dtype=torch.long)
        y = torch.tensor(dix[1:], dtype=torch.long)
        return x, y


class TinyGPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd=32):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Parameter(torch.zeros(1, block_size, n_embd))
        layer = nn.TransformerEncoderLayer(n_embd, 2, 64, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 1)
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.block_size = block_size

    def forward(self, idx, targets=None):
        t = idx.size(1)
        x = self.tok_emb(idx) + self.pos_emb[:, :t, :]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        x = self.blocks(x, mask=mask, is_causal=True)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
        return logits, loss


class Trainer:
    def __init__(self, model, train_dataset, max_iters=3, batch_size=8):
        self.model = model
        self.train_dataset = train_dataset
        self.max_iters = max_iters
        self.batch_size = batch_size
        self.iter_num = 0

    def run(self):
        model = self.model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
        train_loader = DataLoader(
            self.train_dataset,
            sampler=torch.utils.data.RandomSampler(
                self.train_dataset, replacement=True, num_samples=int(1e10)
            ),
            shuffle=False,
            batch_size=self.batch_size,
            num_workers=0,
        )
        model.train()
        data_iter = iter(train_loader)
        while True:
            x, y = next(data_iter)
            logits, self.loss = model(x, y)
            model.zero_grad(set_to_none=True)
            self.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            self.optimizer.step()
            print(f"iter {self.iter_num}: train loss {self.loss.item():.5f}")
            self.iter_num += 1
            if self.iter_num >= self.max_iters:
                break


if __name__ == "__main__":
    torch.manual_seed(3407)
    text = "O Romeo, Romeo! wherefore art thou Romeo?\nDeny thy father and refuse thy name.\n" * 20
    train_dataset = CharDataset(text, block_size=16)
    model = TinyGPT(train_dataset.get_vocab_size(), train_dataset.get_block_size())
    trainer = Trainer(model, train_dataset)
    trainer.run()
