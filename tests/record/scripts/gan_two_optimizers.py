"""A GAN on a 2-D ring of Gaussians: a discriminator step and a generator step per iteration,
each with its own Adam optimizer."""

import argparse
import json
import math

import torch
import torch.nn.functional as F
from torch import nn

latent = 4


def real_batch(n):
    angles = torch.randint(0, 8, (n,)).float() * (2 * math.pi / 8)
    centres = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1) * 2
    return centres + 0.05 * torch.randn(n, 2)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, 32), nn.LeakyReLU(0.2), nn.Linear(32, n_out))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    netG, netD = mlp(latent, 2), mlp(2, 1)
    optG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        real = real_batch(32)
        noise = torch.randn(32, latent)
        fake = netG(noise)

        # (1) Update D: maximize log D(x) + log(1 - D(G(z)))
        optD.zero_grad()
        out_real, out_fake = netD(real), netD(fake.detach())
        loss_d = F.binary_cross_entropy_with_logits(
            out_real, torch.ones_like(out_real)
        ) + F.binary_cross_entropy_with_logits(out_fake, torch.zeros_like(out_fake))
        loss_d.backward()
        optD.step()

        # (2) Update G: maximize log D(G(z))
        optG.zero_grad()
        out = netD(fake)
        loss_g = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
        loss_g.backward()
        optG.step()

        if log:
            record = {"batch": step, "loss_d": loss_d.item(), "loss_g": loss_g.item()}
            log.write(json.dumps(record) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
