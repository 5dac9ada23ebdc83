"""Small, honest statistics for A/B trials: medians, IQR, and a hierarchical bootstrap on a throughput ratio.

A trial is one run: an array of per-step wall times (ms) and the samples one step processes. Its throughput
is ``samples_per_step / mean(wall) × 1000`` (samples/s): the mean, not the median, because throughput is
total samples over total time — a prefetching loader makes some steps instant and others long, and only the
mean charges both. The median step time is reported beside it as the robust "typical step". Runs differ from each other (process start,
machine load) more than steps within a run do, so the bootstrap resamples at both levels: trials with
replacement, then steps within each chosen trial. The point estimate is the ratio of the arms' median trial
throughputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

N_BOOT = 2000
LEVEL = 0.95
SEED = 0


@dataclass(frozen=True)
class Trial:
    """One run's measured steps: wall times in ms (warm-up and profiled steps already excluded)."""

    walls_ms: tuple[float, ...]
    samples_per_step: float

    @property
    def median_ms(self) -> float:
        return float(np.median(self.walls_ms))

    @property
    def mean_ms(self) -> float:
        return float(np.mean(self.walls_ms))

    @property
    def throughput(self) -> float:
        """Samples per second over the measured steps (total samples / total time)."""
        return self.samples_per_step / self.mean_ms * 1e3


@dataclass(frozen=True)
class RatioEstimate:
    """``b / a`` throughput ratio (> 1: B is faster per sample) with its bootstrap interval."""

    point: float
    low: float
    high: float
    level: float
    n_boot: int


def iqr(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, q3 = np.percentile(values, [25, 75])
    return float(q3 - q1)


def median_throughput(trials: Sequence[Trial]) -> float:
    return float(np.median([t.throughput for t in trials]))


def throughput_ratio(a: Sequence[Trial], b: Sequence[Trial], n_boot: int = N_BOOT, level: float = LEVEL,
                     seed: int = SEED) -> RatioEstimate:
    """Ratio of median trial throughputs B/A and a hierarchical-bootstrap percentile interval."""
    if not a or not b:
        raise ValueError("both arms need at least one trial")
    rng = np.random.default_rng(seed)
    boot = _boot_arm(b, n_boot, rng) / _boot_arm(a, n_boot, rng)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return RatioEstimate(point=median_throughput(b) / median_throughput(a), low=float(low), high=float(high),
                         level=level, n_boot=n_boot)


def _boot_arm(trials: Sequence[Trial], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` resampled arm throughputs: median over resampled trials of resampled-step throughputs."""
    per_trial = np.empty((n_boot, len(trials)))
    picks = rng.integers(0, len(trials), size=(n_boot, len(trials)))
    for j in range(len(trials)):
        # resample every trial's steps once per bootstrap round; column j uses the trial picked for slot j
        for i, t in enumerate(trials):
            rows = np.flatnonzero(picks[:, j] == i)
            if rows.size == 0:
                continue
            walls = np.asarray(t.walls_ms, dtype=float)
            idx = rng.integers(0, walls.size, size=(rows.size, walls.size))
            per_trial[rows, j] = t.samples_per_step / walls[idx].mean(axis=1) * 1e3
    return np.median(per_trial, axis=1)
