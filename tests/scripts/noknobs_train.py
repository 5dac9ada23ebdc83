"""A script with no knobs of its own: the model built and moved once, an evaluation under ``no_grad`` before and
during training (as nanoGPT's ``estimate_loss``), then the training loop."""

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 128))
model = model.to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


@torch.no_grad()
def evaluate() -> float:
    model.eval()
    x = torch.randn(256, 128, device=device)
    loss = (model(x) - x).pow(2).mean()
    model.train()
    return loss.item()


for it in range(100_000):
    if it % 500 == 0:
        print(f"iter {it}: eval loss {evaluate():.4f}")
    x = torch.randn(64, 128, device=device)
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
