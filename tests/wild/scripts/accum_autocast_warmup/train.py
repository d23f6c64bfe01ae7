# A hand-written fine-tuning loop in the style of HF's run_*_no_trainer scripts:
# gradient accumulation (loss / gradient_accumulation_steps, step every k batches),
# bf16 autocast on CPU, clip_grad_norm_, a LambdaLR linear warmup then decay.
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class ToyClassificationDataset(Dataset):
    def __init__(self, n=96, seq_len=12, vocab=40):
        g = torch.Generator().manual_seed(0)
        self.input_ids = torch.randint(1, vocab, (n, seq_len), generator=g)
        self.labels = (self.input_ids[:, 0] % 3).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.input_ids[i], "labels": self.labels[i]}


class Classifier(nn.Module):
    def __init__(self, vocab=40, hidden=32, num_labels=3):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.encoder = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.classifier = nn.Linear(hidden, num_labels)
        self.loss_fct = nn.CrossEntropyLoss()

    def forward(self, input_ids, labels=None):
        h = self.encoder(self.embeddings(input_ids)).mean(1)
        logits = self.classifier(h)
        loss = None
        if labels is not None:
            loss = self.loss_fct(logits.view(-1, logits.size(-1)), labels.view(-1))
        return {"loss": loss, "logits": logits}


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step: int):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(
            0.0,
            float(num_training_steps - current_step)
            / float(max(1, num_training_steps - num_warmup_steps)),
        )

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


torch.manual_seed(0)
train_dataloader = DataLoader(ToyClassificationDataset(), batch_size=8, shuffle=True)
model = Classifier()
no_decay = ["bias", "LayerNorm.weight"]
optimizer_grouped_parameters = [
    {
        "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
        "weight_decay": 0.01,
    },
    {
        "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
        "weight_decay": 0.0,
    },
]
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=5e-4)
gradient_accumulation_steps = 3
num_train_epochs = 1
num_update_steps_per_epoch = math.ceil(len(train_dataloader) / gradient_accumulation_steps)
max_train_steps = num_train_epochs * num_update_steps_per_epoch
lr_scheduler = get_linear_schedule_with_warmup(
    optimizer, num_warmup_steps=2, num_training_steps=max_train_steps
)

completed_steps = 0
for _epoch in range(num_train_epochs):
    model.train()
    for step, batch in enumerate(train_dataloader):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            outputs = model(**batch)
        loss = outputs["loss"]
        loss = loss / gradient_accumulation_steps
        loss.backward()
        if step % gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            completed_steps += 1
            print(
                f"step {completed_steps} loss {loss.item() * gradient_accumulation_steps:.4f} lr {lr_scheduler.get_last_lr()[0]:.2e}"
            )
