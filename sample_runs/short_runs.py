"""Short runs averaged vs one long run, on the ``digits`` data with a held-back split (issue 22.5).

One long run trains the small CNN of :mod:`sample_runs.digits` on the whole training split. The alternative
trains ``n`` short, independent runs — each on its own disjoint subset of the training split, each in its own
process, no communication — and averages their predicted probabilities. Both are scored on a held-back split
(:data:`HELD_BACK` of the 1,797 digits, fixed by :data:`SPLIT_SEED`, never trained on). Two comparisons:

- **equal compute**: the ``n`` runs share the long run's optimizer steps (``steps // n`` each);
- **equal wall-clock**: each of the ``n`` runs trains for as long as the long run took (in parallel, so on a
  machine with fewer cores than runs they share them; that is the point of measuring it).

Training time is measured inside each process from its first step (process start and imports excluded, the
same for every run); the ``n`` runs' wall time is the slowest member's.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

HELD_BACK = 0.2
SPLIT_SEED = 1234
BATCH, LR, MOMENTUM = 32, 0.05, 0.9


@dataclass(frozen=True)
class Member:
    """What one run hands back: its held-back probabilities, steps done and training seconds."""

    probs: torch.Tensor
    steps: int
    train_s: float


def split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_held, y_held)``: the digits as (1, 8, 8) images in [0, 1], a fixed held-back split."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(SPLIT_SEED))
    n_held = int(len(y) * HELD_BACK)
    held, train = order[:n_held], order[n_held:]
    return x[train], y[train], x[held], y[held]


def model(width: int = 16) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * width * 16, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def train_member(args: tuple[int, int, int, int | None, float | None]) -> Member:
    """One run: ``(seed, part, parts, steps, seconds)`` — trains on subset ``part`` of ``parts`` until ``steps``
    or ``seconds`` of training, returns its held-back probabilities."""
    seed, part, parts, steps, seconds = args
    torch.set_num_threads(1)
    x, y, xh, _ = split()
    idx = torch.arange(len(y))[part::parts]  # disjoint subsets, each a stride of the shuffled split
    x, y = x[idx], y[idx]
    torch.manual_seed(seed * 1000 + part)
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    g = torch.Generator().manual_seed(seed * 1000 + part)
    done, start = 0, time.perf_counter()
    while (steps is None or done < steps) and (
        seconds is None or time.perf_counter() - start < seconds
    ):
        pick = torch.randint(0, len(y), (BATCH,), generator=g)
        loss = nn.functional.cross_entropy(net(x[pick]), y[pick])
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += 1
    train_s = time.perf_counter() - start
    with torch.no_grad():
        probs = torch.softmax(net(xh), dim=1)
    return Member(probs, done, train_s)


@dataclass(frozen=True)
class Score:
    accuracy: float
    nll: float  # mean negative log-likelihood of the true class on the held-back split
    train_s: float  # slowest member's training time
    steps: int  # optimizer steps, all members together


def score(members: Sequence[Member], y_held: torch.Tensor) -> Score:
    probs = torch.stack([m.probs for m in members]).mean(0)
    acc = float((probs.argmax(1) == y_held).float().mean())
    nll = float(-torch.log(probs[torch.arange(len(y_held)), y_held].clamp_min(1e-12)).mean())
    return Score(acc, nll, max(m.train_s for m in members), sum(m.steps for m in members))


def run_parallel(jobs: list[tuple[int, int, int, int | None, float | None]]) -> list[Member]:
    """Each job in its own process (spawned: no state shared with the parent), all at once."""
    if len(jobs) == 1:
        return [train_member(jobs[0])]
    with mp.get_context("spawn").Pool(len(jobs)) as pool:
        return pool.map(train_member, jobs)


@dataclass(frozen=True)
class Comparison:
    long: Score
    equal_compute: Score
    equal_time: Score
    members: int


def compare(seed: int, steps: int, n: int) -> Comparison:
    """One long run of ``steps`` vs ``n`` short runs at equal compute and at equal wall-clock."""
    y_held = split()[3]
    long = run_parallel([(seed, 0, 1, steps, None)])
    compute = run_parallel([(seed, i, n, steps // n, None) for i in range(n)])
    wall = run_parallel([(seed, i, n, None, long[0].train_s) for i in range(n)])
    return Comparison(score(long, y_held), score(compute, y_held), score(wall, y_held), n)
