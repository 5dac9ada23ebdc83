"""A training loop that pins its own seeds at the top, as most scripts do (``torch.manual_seed(0)``, ``random`` and
numpy too): to-quality's seeds must still differ (the agent offsets these calls per seed)."""

import random

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
w = torch.ones(16, 1)
for step in range(1000):
    x = torch.randn(32, 16)
    loss = nn.functional.mse_loss(model(x), x @ w)
    opt.zero_grad()
    loss.backward()
    opt.step()
