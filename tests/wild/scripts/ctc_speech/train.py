# A speech-recognition tutorial's shape: spectrogram-like features (B, 1, n_mels, T),
# a small CNN + bidirectional GRU acoustic model, log_softmax over characters, the
# output transposed to (T, B, C) for nn.CTCLoss with per-sample input and target
# lengths; blank is index 0, and the character map is a text-transform class.
import torch
import torch.nn as nn
import torch.nn.functional as F


class TextTransform:
    def __init__(self):
        chars = "' abcdefghijklmnopqrstuvwxyz"
        self.char_map = {c: i + 1 for i, c in enumerate(chars)}  # 0 is the CTC blank
        self.index_map = {i: c for c, i in self.char_map.items()}

    def text_to_int(self, text):
        return [self.char_map[c] for c in text]

    def int_to_text(self, labels):
        return "".join(self.index_map[i] for i in labels)


WORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]


def synth_utterance(text, text_transform, n_mels=16, frames_per_char=4, generator=None):
    # Each character becomes a few frames of its own fixed spectral pattern plus noise.
    ids = text_transform.text_to_int(text)
    base = torch.randn(29, n_mels, generator=torch.Generator().manual_seed(7))
    frames = base[ids].repeat_interleave(frames_per_char, dim=0)
    frames = frames + 0.3 * torch.randn(frames.shape, generator=generator)
    return frames.T, ids  # (n_mels, T)


def data_processing(batch):
    spectrograms, labels, input_lengths, label_lengths = [], [], [], []
    for spec, ids in batch:
        spectrograms.append(spec.T)
        labels.append(torch.tensor(ids))
        input_lengths.append(spec.shape[1] // 2)  # the CNN halves time
        label_lengths.append(len(ids))
    spectrograms = nn.utils.rnn.pad_sequence(spectrograms, batch_first=True)
    spectrograms = spectrograms.unsqueeze(1).transpose(2, 3)  # (B, 1, n_mels, T)
    labels = nn.utils.rnn.pad_sequence(labels, batch_first=True)
    return spectrograms, labels, input_lengths, label_lengths


class SpeechRecognitionModel(nn.Module):
    def __init__(self, n_mels=16, n_class=29, rnn_dim=32):
        super().__init__()
        self.cnn = nn.Conv2d(1, 8, 3, stride=2, padding=1)
        self.fully_connected = nn.Linear(8 * (n_mels // 2), rnn_dim)
        self.birnn = nn.GRU(rnn_dim, rnn_dim, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(2 * rnn_dim, n_class)

    def forward(self, x):
        x = F.gelu(self.cnn(x))  # (B, 8, n_mels/2, T/2)
        b, c, f, t = x.size()
        x = x.view(b, c * f, t).transpose(1, 2)  # (B, T/2, features)
        x, _ = self.birnn(F.gelu(self.fully_connected(x)))
        return self.classifier(x)


if __name__ == "__main__":
    torch.manual_seed(7)
    gen = torch.Generator().manual_seed(1)
    text_transform = TextTransform()
    model = SpeechRecognitionModel()
    criterion = nn.CTCLoss(blank=0, zero_infinity=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    for step in range(4):
        words = [WORDS[(3 * step + i) % len(WORDS)] for i in range(4)]
        batch = [synth_utterance(w, text_transform, generator=gen) for w in words]
        spectrograms, labels, input_lengths, label_lengths = data_processing(batch)
        optimizer.zero_grad()
        output = model(spectrograms)  # (batch, time, n_class)
        output = F.log_softmax(output, dim=2)
        output = output.transpose(0, 1)  # (time, batch, n_class)
        loss = criterion(output, labels, input_lengths, label_lengths)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")
