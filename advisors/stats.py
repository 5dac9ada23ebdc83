"""Small, honest statistics for A/B trials: medians, IQR, and a paired two-level bootstrap on a
throughput ratio; for two single measurements (the regression gate), a block bootstrap on the ratio
of their times per step.

A trial is one run: an array of per-step wall times (ms) and the samples one step processes. Its throughput
is ``samples_per_step / mean(wall) × 1000`` (samples/s): the mean, not the median, because throughput is
total samples over total time — a prefetching loader makes some steps instant and others long, and only the
mean charges both. The median step time is reported beside it as the robust "typical step", never as the
speed-up.

**The speed-up** of a fix is ``after / before``, each the *median over the arm's trials* of their throughputs:
the two numbers shown beside it reproduce it exactly, and one trial slowed by another program (a contended
run at 177 ms among runs at 105 ms) cannot carry it, as it carried a geometric mean of pair ratios. A and B run
interleaved (A B, B A, …), so trial ``i`` of each arm forms a pair that saw the same machine load; each pair's
own ratio is kept (:attr:`RatioEstimate.pairs`) so a verdict can ask whether the pairs agree. Runs differ from
each other (process start, load from other programs) more than steps within a run do, so the interval comes
from a two-level bootstrap of the same statistic: pairs with replacement, then steps within each run.

:func:`mean_ratio` serves a comparison of *one* run (or trace) per side: the ratio of the two sides'
times per step (elapsed ÷ steps, the same statistic as the throughput, inverted), its interval from
a block bootstrap of each side's steps. (:func:`median_ratio`, of the typical steps, is kept for
what asks about a typical step, never for a speed.) With one run per side the run-to-run noise
cannot be seen in it (only the step-to-step noise can): a gate built on it needs a tolerance as well
(see :mod:`advisors.compare.regression`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from stepwise_agent import steady

N_BOOT = 2000
LEVEL = 0.95
SEED = 0
BOOT_CELLS = 1 << 22  # resampled values held at once by :func:`median_ratio` (32 MiB of float64)


@dataclass(frozen=True)
class Trial:
    """One run's measured steps: wall times in ms (warm-up and profiled steps already excluded)."""

    walls_ms: tuple[float, ...]
    samples_per_step: float
    data_ms: tuple[float, ...] | None = (
        None  # each timed step's time drawing batches, when the run recorded it
    )

    @property
    def median_ms(self) -> float:
        return float(np.median(self.walls_ms))

    @property
    def mean_ms(self) -> float:
        return float(np.mean(self.walls_ms))

    @property
    def rest_ms(self) -> float | None:
        """The time per step without its batch drawing (mean of ``wall − data``), or ``None`` when
        not recorded: read against a time per step, so the same statistic on both sides."""
        if not self.data_ms or len(self.data_ms) != len(self.walls_ms):
            return None
        return float(np.mean([w - d for w, d in zip(self.walls_ms, self.data_ms)]))

    @property
    def throughput(self) -> float:
        """The trial's samples/s: :func:`stepwise_agent.steady.samples_per_s` of its measured steps (total samples
        / total time), the number its run shows everywhere."""
        return (
            steady.samples_per_s([self.samples_per_step] * len(self.walls_ms), self.walls_ms) or 0.0
        )


@dataclass(frozen=True)
class RatioEstimate:
    """A ``b / a`` ratio with its bootstrap interval: of throughputs from :func:`throughput_ratio` (> 1: B is
    faster per sample), of times per step from :func:`mean_ratio` (> 1: B is slower)."""

    point: float
    low: float
    high: float
    level: float
    n_boot: int
    before: float | None = (
        None  # throughput_ratio: A's samples/s (median over its trials); point = after / before
    )
    after: float | None = None  # B's samples/s, likewise
    pairs: tuple[
        float, ...
    ] = ()  # throughput_ratio: each back-to-back pair's own B/A ratio, in trial order

    @property
    def pairs_faster(self) -> int:
        """How many pairs saw B faster than A."""
        return sum(1 for r in self.pairs if r > 1.0)


def iqr(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, q3 = np.percentile(values, [25, 75])
    return float(q3 - q1)


def relative_spread(values: Sequence[float]) -> float:
    """(max − min) / median: how far apart the trials of one arm landed (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    return float((max(values) - min(values)) / np.median(values))


def throughput_ratio(
    a: Sequence[Trial],
    b: Sequence[Trial],
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = SEED,
) -> RatioEstimate:
    """Paired B/A throughput ratio over pairs ``(a[i], b[i])`` (trials run back to back): ``median(B) / median(A)``
    of the trials' throughputs, with a percentile interval from a bootstrap of that statistic that resamples
    pairs, then the steps within each run of a pair."""
    n = min(len(a), len(b))
    if n == 0:
        raise ValueError("both arms need at least one trial")
    rng = np.random.default_rng(seed)
    thr_a = np.array([t.throughput for t in a[:n]])
    thr_b = np.array([t.throughput for t in b[:n]])
    before, after = float(np.median(thr_a)), float(np.median(thr_b))
    picks = rng.integers(0, n, size=(n_boot, n))
    boot_a, boot_b = np.zeros((n_boot, n)), np.zeros((n_boot, n))
    for i in range(n):
        rows = picks == i  # bootstrap slots that picked pair i
        k = int(rows.sum())
        if k:
            boot_a[rows] = _resampled(a[i], k, rng)
            boot_b[rows] = _resampled(b[i], k, rng)
    boot = np.median(boot_b, axis=1) / np.median(boot_a, axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return RatioEstimate(
        point=after / before,
        low=float(low),
        high=float(high),
        level=level,
        n_boot=n_boot,
        before=before,
        after=after,
        pairs=tuple(float(x) for x in thr_b / thr_a),
    )


def median_ratio(
    a: Sequence[float],
    b: Sequence[float],
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = SEED,
) -> RatioEstimate:
    """``median(b) / median(a)`` of two independent samples (e.g. the per-step times of two runs), with a
    percentile interval from a bootstrap that resamples each side's values with replacement. The median, not
    the mean: a burst of load from another program stretches a few steps, and must not move the verdict."""
    return _two_runs_ratio(a, b, _boot_medians, np.median, n_boot, level, seed)


def mean_ratio(
    a: Sequence[float],
    b: Sequence[float],
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = SEED,
) -> RatioEstimate:
    """``mean(b) / mean(a)`` of two runs' per-step times: the ratio of their times per step (elapsed
    ÷ steps, :func:`stepwise_agent.steady.time_per_step`), which for equal batches is the inverse of
    their samples/s ratio. Its interval comes from a circular block bootstrap of each side's steps
    (blocks of :func:`block_length` consecutive steps), so a stall that recurs every few steps stays
    in the resamples at its own rate instead of being drawn independently of its neighbours."""
    return _two_runs_ratio(a, b, _boot_block_means, np.mean, n_boot, level, seed)


def _two_runs_ratio(
    a: Sequence[float],
    b: Sequence[float],
    resampled: Callable[[np.ndarray, int, np.random.Generator], np.ndarray],
    statistic: Callable[[np.ndarray], Any],
    n_boot: int,
    level: float,
    seed: int,
) -> RatioEstimate:
    """``statistic(b) / statistic(a)`` of two independent samples, its percentile interval from
    ``resampled`` (each side's bootstrapped statistic, ``n_boot`` of them)."""
    va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if va.size == 0 or vb.size == 0 or np.any(va <= 0) or np.any(vb <= 0):
        raise ValueError("both samples need at least one positive value, and only positive values")
    rng = np.random.default_rng(seed)
    boot_a, boot_b = resampled(va, n_boot, rng), resampled(vb, n_boot, rng)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(boot_b / boot_a, [tail, 100 - tail])
    point = float(statistic(vb) / statistic(va))
    return RatioEstimate(point=point, low=float(low), high=float(high), level=level, n_boot=n_boot)


def block_length(n: int) -> int:
    """Consecutive steps per resampled block: about ``n^(1/3)`` (the usual rate for a mean), at
    least one."""
    return max(1, min(n, round(n ** (1 / 3))))


def _boot_block_means(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``n_boot`` circular block-bootstrap resamples of ``values`` (in chunks of
    ``BOOT_CELLS``)."""
    n = values.size
    k = block_length(n)
    blocks = -(-n // k)
    offsets = np.arange(k)
    rows = max(1, BOOT_CELLS // (blocks * k))
    out = []
    for i in range(0, n_boot, rows):
        m = min(rows, n_boot - i)
        starts = rng.integers(0, n, size=(m, blocks, 1))
        idx = ((starts + offsets) % n).reshape(m, blocks * k)[:, :n]
        out.append(values[idx].mean(axis=1))
    return np.concatenate(out)


def _boot_medians(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``n_boot`` resamples of ``values``, drawn in chunks of at most ``BOOT_CELLS`` values (a
    trace of many ranks × steps must not need gigabytes)."""
    rows = max(1, BOOT_CELLS // values.size)
    return np.concatenate(
        [
            np.median(
                values[rng.integers(0, values.size, size=(min(rows, n_boot - i), values.size))],
                axis=1,
            )
            for i in range(0, n_boot, rows)
        ]
    )


def _resampled(t: Trial, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` throughputs of ``t`` with its steps resampled with replacement."""
    walls = np.asarray(t.walls_ms, dtype=float)
    idx = rng.integers(0, walls.size, size=(k, walls.size))
    return t.samples_per_step / walls[idx].mean(axis=1) * 1e3


def beside(x: float, threshold: float, digits: int = 2, most: int = 6) -> str:
    """``x`` with enough decimals to see which side of ``threshold`` it falls on: 1.0257 against 1.03 reads
    "1.0257", never "1.03" (which would look like it clears). Starts at ``digits`` decimals."""
    for d in range(digits, most + 1):
        text = f"{x:.{d}f}"
        shown = float(text)
        if (shown > threshold) == (x > threshold) and (shown < threshold) == (x < threshold):
            return text
    return f"{x:.{most}f}"
