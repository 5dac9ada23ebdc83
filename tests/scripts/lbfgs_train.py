"""A closure optimizer: LBFGS runs the forward and backward inside ``optimizer.step(closure)``."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 1))
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, history_size=5)
x, y = torch.randn(1024, 64), torch.randn(1024, 1)


def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for step in range(100_000):
    opt.step(closure)
