# A language model over SentencePiece pieces: the processor trained on the corpus (here in
# memory, as spm.SentencePieceTrainer.train(sentence_iterator=..., model_writer=...) allows),
# the corpus encoded up front, and a GRU predicting the next piece.
import io

import sentencepiece as spm
import torch
import torch.nn as nn

corpus = [
    "to be or not to be that is the question",
    "whether tis nobler in the mind to suffer",
    "the slings and arrows of outrageous fortune",
    "or to take arms against a sea of troubles",
] * 10

model_file = io.BytesIO()
spm.SentencePieceTrainer.train(
    sentence_iterator=iter(corpus),
    model_writer=model_file,
    vocab_size=40,
    pad_id=3,
    model_type="unigram",
    minloglevel=2,
)
sp = spm.SentencePieceProcessor(model_proto=model_file.getvalue())
pieces = [torch.tensor(sp.encode(line)) for line in corpus]
data = torch.nn.utils.rnn.pad_sequence(pieces, batch_first=True, padding_value=sp.pad_id())


class PieceLM(nn.Module):
    def __init__(self, n_vocab, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(n_vocab, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, n_vocab)

    def forward(self, x):
        h, _ = self.gru(self.embed(x))
        return self.out(h)


torch.manual_seed(0)
model = PieceLM(sp.get_piece_size())
criterion = nn.CrossEntropyLoss(ignore_index=sp.pad_id())
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(3):
    batch = data[step * 8 : (step + 1) * 8]
    logits = model(batch[:, :-1])
    loss = criterion(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
