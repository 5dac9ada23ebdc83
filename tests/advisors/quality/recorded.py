"""Recorded training curves on a fake clock: what a run of a small classifier writes to ``steps.jsonl``, from a
stated model of convergence and step cost, so the decisions are tested on curves whose answer is known.

Convergence: ``loss = floor + (start − floor) · exp(−progress)``; each optimizer step adds
``RATE · gain`` to progress, where ``gain`` is the step's effective learning-rate multiple: with the batch ×k and
the rate scaled, ``min(lr/lr0, k)`` times :data:`SCALING_EFFICIENCY` per doubling beyond 1 (linear scaling
holds only approximately). Step cost: ``OVERHEAD_MS`` of Python per pass plus ``PER_SAMPLE_MS`` per sample;
accumulation pays one pass per micro-batch. Noise: Gaussian on the loss, log-normal on step times, by seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tests.fake_clock import FakeClock

START, FLOOR, RATE = 2.3, 0.2, 0.02
OVERHEAD_MS, PER_SAMPLE_MS = 8.0, 0.05
SCALING_EFFICIENCY = 0.85
LOSS_NOISE, TIME_NOISE = 0.04, 0.05


@dataclass(frozen=True)
class Recipe:
    batch: int = 32
    lr: float = 0.1
    accum: int = 1
    base_batch: int = 32
    base_lr: float = 0.1
    plateau_at: float | None = None  # the loss stops at this value (a model at capacity)


def record(recipe: Recipe, steps: int, seed: int, clock: FakeClock | None = None,
           stop_below: float | None = None) -> pd.DataFrame:
    """``steps.jsonl`` rows of one run; ``stop_below``: the run is stopped once its EMA loss is at or below."""
    clock = clock or FakeClock()
    rng = np.random.default_rng(seed)
    k = recipe.batch / recipe.base_batch
    gain = min(recipe.lr / recipe.base_lr, k)
    if gain > 1:
        gain *= SCALING_EFFICIENCY ** math.log2(gain)
    micro = recipe.batch // recipe.accum
    rows, progress, ema, weight = [], 0.0, 0.0, 0.0
    for step in range(steps):
        start_ns = clock.time_ns()
        wall = recipe.accum * (OVERHEAD_MS + PER_SAMPLE_MS * micro) * float(rng.lognormal(0.0, TIME_NOISE))
        clock.advance(wall / 1e3)
        progress += RATE * gain
        floor = recipe.plateau_at if recipe.plateau_at is not None else FLOOR
        loss = floor + (START - floor) * math.exp(-progress) + float(rng.normal(0.0, LOSS_NOISE))
        rows.append({"rank": 0, "step": step, "wall_ms": wall, "loss": loss, "samples": recipe.batch,
                     "profiled": False, "t_unix_ns": start_ns})
        ema, weight = 0.9 * ema + 0.1 * loss, 0.9 * weight + 0.1
        if stop_below is not None and ema / weight <= stop_below:
            break
    return pd.DataFrame(rows)
