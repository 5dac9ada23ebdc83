"""Two models, two optimizers: a small GAN on synthetic data (the generator's and the discriminator's calls
each sit in their own statements)."""

import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 64))
D = nn.Sequential(nn.Linear(64, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4)
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)
bce = nn.BCEWithLogitsLoss()
real_data = torch.randn(4096, 64)
for step in range(100_000):
    real = real_data[torch.randint(0, 4096, (64,))]
    fake = G(torch.randn(64, 32))
    d_real = D(real)
    d_fake = D(fake.detach())
    loss_d = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    g_out = D(fake)
    loss_g = bce(g_out, torch.ones_like(g_out))
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
