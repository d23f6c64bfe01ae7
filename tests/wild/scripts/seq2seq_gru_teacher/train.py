# The PyTorch "translation with a sequence to sequence network" tutorial's shape: a
# Lang class per language (word2index / index2word), an EncoderRNN and a DecoderRNN of
# GRUs, teacher forcing (the decoder reads the target shifted right), NLLLoss over
# log_softmax outputs. The source (English) and target (French) vocabularies differ.
import torch
import torch.nn as nn
import torch.nn.functional as F

SOS_token, EOS_token = 0, 1
MAX_LENGTH = 7
PAIRS = [
    ("i am cold", "j ai froid"),
    ("he is tall", "il est grand"),
    ("we are happy", "nous sommes heureux"),
    ("she is here", "elle est ici"),
    ("you are late", "tu es en retard"),
    ("they are tired", "ils sont fatigues"),
    ("i am hungry", "j ai faim"),
    ("he is kind", "il est gentil"),
]


class Lang:
    def __init__(self, name):
        self.name = name
        self.word2index = {}
        self.word2count = {}
        self.index2word = {0: "SOS", 1: "EOS"}
        self.n_words = 2

    def addSentence(self, sentence):
        for word in sentence.split(" "):
            self.addWord(word)

    def addWord(self, word):
        if word not in self.word2index:
            self.word2index[word] = self.n_words
            self.word2count[word] = 1
            self.index2word[self.n_words] = word
            self.n_words += 1
        else:
            self.word2count[word] += 1


def tensorFromSentence(lang, sentence):
    indexes = [lang.word2index[word] for word in sentence.split(" ")] + [EOS_token]
    return indexes + [EOS_token] * (MAX_LENGTH - len(indexes))


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)

    def forward(self, input):
        embedded = self.embedding(input)
        output, hidden = self.gru(embedded)
        return output, hidden


class DecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, encoder_hidden, target_tensor):
        # Teacher forcing: the decoder reads SOS + the target, shifted right by one.
        sos = torch.full((target_tensor.size(0), 1), SOS_token, dtype=torch.long)
        decoder_input = torch.cat([sos, target_tensor[:, :-1]], dim=1)
        output, hidden = self.gru(F.relu(self.embedding(decoder_input)), encoder_hidden)
        return F.log_softmax(self.out(output), dim=-1), hidden


if __name__ == "__main__":
    torch.manual_seed(0)
    input_lang, output_lang = Lang("eng"), Lang("fra")
    for eng, fra in PAIRS:
        input_lang.addSentence(eng)
        output_lang.addSentence(fra)
    input_tensor = torch.tensor([tensorFromSentence(input_lang, p[0]) for p in PAIRS])
    target_tensor = torch.tensor([tensorFromSentence(output_lang, p[1]) for p in PAIRS])

    encoder = EncoderRNN(input_lang.n_words, 32)
    decoder = DecoderRNN(32, output_lang.n_words)
    encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()

    for epoch in range(4):
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _ = decoder(encoder_hidden, target_tensor)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
        loss.backward()
        encoder_optimizer.step()
        decoder_optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")
