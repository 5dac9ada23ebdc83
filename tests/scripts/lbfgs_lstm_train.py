"""An LBFGS script in the shape of pytorch/examples ``time_sequence_prediction``: full-batch LBFGS over an
``LSTMCell`` loop. One optimizer step is ``max_iter`` closures, each ``STEPS_IN_TIME`` cell calls forward and
backward: tens of thousands of small ops, so a profiled step's event buffer outgrows the script's own memory
(which stays small: one batch of short sequences)."""

import math
import os

import torch
from torch import nn

STEPS_IN_TIME = int(os.environ.get("LBFGS_TIME_STEPS", "120"))
torch.manual_seed(0)


class Sequence(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm1, self.lstm2, self.linear = nn.LSTMCell(1, 24), nn.LSTMCell(24, 24), nn.Linear(24, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h1 = c1 = torch.zeros(x.size(0), 24)
        h2 = c2 = torch.zeros(x.size(0), 24)
        outputs = []
        for t in range(x.size(1)):
            h1, c1 = self.lstm1(x[:, t:t + 1], (h1, c1))
            h2, c2 = self.lstm2(h1, (h2, c2))
            outputs.append(self.linear(h2))
        return torch.cat(outputs, dim=1)


t = torch.arange(STEPS_IN_TIME + 1, dtype=torch.float32)
phase = torch.rand(16, 1) * 2 * math.pi
wave = torch.sin(t / 8.0 + phase)
x, y = wave[:, :-1], wave[:, 1:]
model = Sequence()
opt = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=10)


def closure() -> torch.Tensor:
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for step in range(1000):
    opt.step(closure)
