"""A DDPM training step as the small diffusion repos write it: a linear beta schedule,
a random timestep per sample, the noised picture made in closed form, a sinusoidal
timestep embedding added into a small conv net, and MSE on the predicted noise."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

device = "cpu"
T = 100
betas = torch.linspace(1e-4, 0.02, T)
alphas = 1.0 - betas
alphas_cumprod = torch.cumprod(alphas, dim=0)
sqrt_alphas_cumprod = torch.sqrt(alphas_cumprod)
sqrt_one_minus_alphas_cumprod = torch.sqrt(1.0 - alphas_cumprod)


def extract(a, t, x_shape):
    batch_size = t.shape[0]
    out = a.gather(-1, t.cpu())
    return out.reshape(batch_size, *((1,) * (len(x_shape) - 1))).to(t.device)


def q_sample(x_start, t, noise=None):
    if noise is None:
        noise = torch.randn_like(x_start)
    return (
        extract(sqrt_alphas_cumprod, t, x_start.shape) * x_start
        + extract(sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise
    )


class SinusoidalPositionEmbeddings(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, time):
        half_dim = self.dim // 2
        embeddings = math.log(10000) / (half_dim - 1)
        embeddings = torch.exp(torch.arange(half_dim, device=time.device) * -embeddings)
        embeddings = time[:, None] * embeddings[None, :]
        embeddings = torch.cat((embeddings.sin(), embeddings.cos()), dim=-1)
        return embeddings


class Block(nn.Module):
    def __init__(self, dim_in, dim_out, time_emb_dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out))
        self.conv1 = nn.Conv2d(dim_in, dim_out, 3, padding=1)
        self.conv2 = nn.Conv2d(dim_out, dim_out, 3, padding=1)
        self.norm = nn.GroupNorm(4, dim_out)

    def forward(self, x, time_emb):
        h = self.conv1(x)
        h = h + self.mlp(time_emb)[:, :, None, None]
        h = F.silu(self.norm(h))
        return self.conv2(h)


class TinyUnet(nn.Module):
    def __init__(self, channels=1, dim=16):
        super().__init__()
        self.time_mlp = nn.Sequential(
            SinusoidalPositionEmbeddings(dim),
            nn.Linear(dim, dim * 4),
            nn.GELU(),
            nn.Linear(dim * 4, dim * 4),
        )
        self.down = Block(channels, dim, dim * 4)
        self.mid = Block(dim, dim, dim * 4)
        self.out = nn.Conv2d(dim, channels, 1)

    def forward(self, x, time):
        t = self.time_mlp(time)
        h = self.down(x, t)
        h = self.mid(h, t)
        return self.out(h)


def p_losses(denoise_model, x_start, t, noise=None, loss_type="l2"):
    if noise is None:
        noise = torch.randn_like(x_start)

    x_noisy = q_sample(x_start=x_start, t=t, noise=noise)
    predicted_noise = denoise_model(x_noisy, t)

    if loss_type == "l1":
        loss = F.l1_loss(noise, predicted_noise)
    elif loss_type == "l2":
        loss = F.mse_loss(noise, predicted_noise)
    elif loss_type == "huber":
        loss = F.smooth_l1_loss(noise, predicted_noise)
    else:
        raise NotImplementedError()

    return loss


torch.manual_seed(0)
image_size = 12
data = torch.rand(64, 1, image_size, image_size) * 2 - 1  # scaled to [-1, 1]
dataloader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
model = TinyUnet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

epochs = 1
for _epoch in range(epochs):
    for step, batch in enumerate(dataloader):
        optimizer.zero_grad()

        batch_size = batch.shape[0]
        batch = batch.to(device)

        # Algorithm 1 line 3: sample t uniformally for every example in the batch
        t = torch.randint(0, T, (batch_size,), device=device).long()

        loss = p_losses(model, batch, t, loss_type="l2")

        if step % 2 == 0:
            print("Loss:", loss.item())

        loss.backward()
        optimizer.step()
