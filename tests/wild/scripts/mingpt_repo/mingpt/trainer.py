"""A minGPT-style Trainer: the loop lives in the package, the script only configures it."""

import torch
from torch.utils.data.dataloader import DataLoader


class Trainer:
    def __init__(self, config, model, train_dataset):
        self.config, self.model, self.train_dataset = config, model, train_dataset
        self.callbacks = []

    def run(self):
        model, config = self.model, self.config
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
        loader = DataLoader(
            self.train_dataset,
            sampler=torch.utils.data.RandomSampler(self.train_dataset, replacement=True),
            shuffle=False,
            batch_size=config.batch_size,
        )
        model.train()
        data_iter = iter(loader)
        for self.iter_num in range(config.max_iters):
            x, y = next(data_iter)
            logits, self.loss = model(x, y)
            model.zero_grad(set_to_none=True)
            self.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
            optimizer.step()
