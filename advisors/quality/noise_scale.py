"""The baseline's gradient noise scale B_simple, from the rows its runs' meter wrote (``noise_scale.jsonl``,
:mod:`stepwise_agent.noise_scale`): the number, an interval, how many steps it used and what it cost.

Each row is one window of consecutive optimizer steps: the mean squared gradient norm of one step's batch and
the squared norm of the window's mean gradient. :func:`stepwise_agent.noise_scale.two_batch` turns each row into
one (|G|², tr Σ) pair in units of one step's batch; the pairs of every baseline seed are **averaged before
dividing** (the plain mean over the runs: the prediction is about the whole run, so every part of it weighs the
same), and the ratio times the batch size is B_simple in samples. The interval is a percentile bootstrap over
windows (ratio of the resampled means). The overhead is the time spent in the meter's hook over the windows'
wall time (it must stay a few percent of a step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from advisors.stats import LEVEL, N_BOOT, SEED
from stepwise_agent.noise_scale import FILE, two_batch


@dataclass(frozen=True)
class NoiseScale:
    """B_simple in samples (``None`` when the mean |G|² was not positive: the gradient is all noise), its
    interval, the steps and windows it used, the batch it was measured at and the meter's overhead (a share)."""

    b_simple: float | None
    interval: tuple[float, float] | None
    steps: int
    windows: int
    batch: int
    overhead: float
    g2: float
    trace: float
    level: float = LEVEL

    @property
    def critical_batch(self) -> float | None:
        """B_crit ≈ B_noise (McCandlish et al.: the batch where steps and samples trade off evenly)."""
        return self.b_simple

    def to_json(self) -> dict[str, Any]:
        # JSON has no infinity: an unbounded end (|G|² ≤ 0 in some resamples) is null
        return {
            "b_simple": self.b_simple,
            "interval": [x if math.isfinite(x) else None for x in self.interval]
            if self.interval
            else None,
            "level": self.level,
            "steps": self.steps,
            "windows": self.windows,
            "batch": self.batch,
            "overhead": self.overhead,
            "g2": self.g2,
            "trace": self.trace,
            "critical_batch": self.critical_batch,
        }


def read_rows(run_dirs: Iterable[str | Path | None]) -> list[dict[str, Any]]:
    from profilers.store.files import read_jsonl

    rows: list[dict[str, Any]] = []
    for d in run_dirs:
        if d is not None:
            rows += [
                r
                for r in read_jsonl(Path(d) / FILE)
                if isinstance(r, dict) and r.get("window", 0) >= 2
            ]
    return rows


def estimate(
    rows: Sequence[dict[str, Any]],
    batch: int,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = SEED,
) -> NoiseScale | None:
    """B_simple from the meter's rows at ``batch`` samples per step (see the module docs); ``None`` without rows."""
    if not rows or batch < 1:
        return None
    pairs = np.array([two_batch(1.0, r["sq_small"], float(r["window"]), r["sq_big"]) for r in rows])
    g2, trace = pairs.mean(axis=0)
    point = float(batch * trace / g2) if g2 > 0 else None
    interval = None
    if point is not None and len(rows) >= 3:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(rows), (n_boot, len(rows)))
        g2s, trs = pairs[idx, 0].mean(axis=1), pairs[idx, 1].mean(axis=1)
        ratios = np.where(g2s > 0, batch * trs / np.where(g2s > 0, g2s, 1.0), np.inf)
        tail = (1 - level) / 2 * 100
        low, high = np.percentile(ratios, [tail, 100 - tail], method="inverted_cdf")
        interval = (float(low), float(high))
    # the hook's time over the wall time of the steps it covers: each window and the gap after it
    wall = sum(
        float(r.get("wall_s", 0.0)) * (r["window"] + int(r.get("gap", 0))) / r["window"]
        for r in rows
    )
    hook = sum(float(r.get("hook_s", 0.0)) for r in rows)
    return NoiseScale(
        point,
        interval,
        int(sum(r["window"] for r in rows)),
        len(rows),
        batch,
        hook / wall if wall > 0 else 0.0,
        float(g2),
        float(trace * batch),
        level,
    )


def batch_of_run(run_dir: Path) -> int | None:
    """The batch a run's steps were taken at: a workload's ``spec.json``, else the script's training DataLoader
    as its ``injected.json`` recorded it."""
    from profilers.store.files import read_json

    spec = read_json(run_dir / "spec.json")
    if isinstance(spec, dict) and isinstance(spec.get("batch_size"), int):
        return int(spec["batch_size"])
    injected = read_json(run_dir / "injected.json")
    size = (
        ((injected or {}).get("loader") or {}).get("batch_size")
        if isinstance(injected, dict)
        else None
    )
    return size if isinstance(size, int) else None


def for_run(run_dir: str | Path) -> NoiseScale | None:
    """One run's noise scale (``None``: it carried no meter, or its batch is unknown)."""
    rows = read_rows([run_dir])
    batch = batch_of_run(Path(run_dir)) if rows else None
    return estimate(rows, batch) if batch else None
