# CLIP-style contrastive training (open_clip's ClipLoss, shortened): two towers,
# L2-normalised features, a learned logit scale, cross-entropy both ways averaged.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class ImageEncoder(nn.Module):
    def __init__(self, embed_dim):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.proj = nn.Linear(8 * 8 * 8, embed_dim)

    def forward(self, x):
        return self.proj(F.relu(self.conv(x)).flatten(1))


class TextEncoder(nn.Module):
    def __init__(self, vocab_size, embed_dim, width=32):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, width)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.randn(width, embed_dim) * width**-0.5)

    def forward(self, text):
        x = self.token_embedding(text).mean(dim=1)
        x = self.ln_final(x)
        return x @ self.text_projection


class CLIP(nn.Module):
    def __init__(self, embed_dim=16, vocab_size=50):
        super().__init__()
        self.visual = ImageEncoder(embed_dim)
        self.text = TextEncoder(vocab_size, embed_dim)
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

    def encode_image(self, image, normalize=False):
        features = self.visual(image)
        return F.normalize(features, dim=-1) if normalize else features

    def encode_text(self, text, normalize=False):
        features = self.text(text)
        return F.normalize(features, dim=-1) if normalize else features

    def forward(self, image, text):
        image_features = self.encode_image(image, normalize=True)
        text_features = self.encode_text(text, normalize=True)
        return image_features, text_features, self.logit_scale.exp()


class ClipLoss(nn.Module):
    def get_ground_truth(self, device, num_logits):
        return torch.arange(num_logits, device=device, dtype=torch.long)

    def get_logits(self, image_features, text_features, logit_scale):
        logits_per_image = logit_scale * image_features @ text_features.T
        logits_per_text = logit_scale * text_features @ image_features.T
        return logits_per_image, logits_per_text

    def forward(self, image_features, text_features, logit_scale, output_dict=False):
        device = image_features.device
        logits_per_image, logits_per_text = self.get_logits(
            image_features, text_features, logit_scale
        )
        labels = self.get_ground_truth(device, logits_per_image.shape[0])
        total_loss = (
            F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)
        ) / 2
        return {"contrastive_loss": total_loss} if output_dict else total_loss


torch.manual_seed(0)
images = torch.randn(48, 3, 16, 16)
captions = torch.randint(0, 50, (48, 6))
model = CLIP()
loss_fn = ClipLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.2)
batch_size = 12
for i in range(len(images) // batch_size):
    image, text = (
        images[i * batch_size : (i + 1) * batch_size],
        captions[i * batch_size : (i + 1) * batch_size],
    )
    optimizer.zero_grad()
    image_features, text_features, logit_scale = model(image, text)
    losses = loss_fn(image_features, text_features, logit_scale, output_dict=True)
    total_loss = sum(losses.values())
    losses["loss"] = total_loss
    total_loss.backward()
    optimizer.step()
    # Note: we clamp to 4.6052 = ln(100), as in the original paper.
    with torch.no_grad():
        model.logit_scale.clamp_(0, np.log(100))
    print(f"step {i} loss {total_loss.item():.4f} scale {logit_scale.item():.3f}")
