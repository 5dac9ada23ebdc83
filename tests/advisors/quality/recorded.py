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
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tests.fake_clock import FakeClock

if TYPE_CHECKING:
    from advisors.quality.candidates import Candidate
    from profilers.run.script_spec import ScriptSpec

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


def record(
    recipe: Recipe,
    steps: int,
    seed: int,
    clock: FakeClock | None = None,
    stop_below: float | None = None,
) -> pd.DataFrame:
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
        wall = (
            recipe.accum
            * (OVERHEAD_MS + PER_SAMPLE_MS * micro)
            * float(rng.lognormal(0.0, TIME_NOISE))
        )
        clock.advance(wall / 1e3)
        progress += RATE * gain
        floor = recipe.plateau_at if recipe.plateau_at is not None else FLOOR
        loss = floor + (START - floor) * math.exp(-progress) + float(rng.normal(0.0, LOSS_NOISE))
        rows.append(
            {
                "rank": 0,
                "step": step,
                "wall_ms": wall,
                "loss": loss,
                "samples": recipe.batch,
                "profiled": False,
                "t_unix_ns": start_ns,
            }
        )
        ema, weight = 0.9 * ema + 0.1 * loss, 0.9 * weight + 0.1
        if stop_below is not None and ema / weight <= stop_below:
            break
    return pd.DataFrame(rows)


# -- the same model, run as a script's arms are: a ScriptSpec with injected convergence knobs -----------------------
def script(measure_steps: int = 10) -> ScriptSpec:
    """The baseline the decisions are taken on: a script whose baseline run built ``SGD(lr=0.1)`` and a
    ``DataLoader(batch_size=32)`` (the fake runs record them as the agent does)."""
    from profilers.run.script_spec import ScriptSpec

    return ScriptSpec(command=("python", "-m", "train"), cwd="/", measure_steps=measure_steps)


def recipe_of(spec: ScriptSpec, plateau_at: float | None = None) -> Recipe:
    """The recorded model's recipe for a script arm: its injected batch scale, rate scale and accumulation."""
    knobs = spec.inject
    accum = int(knobs.get("grad_accum", 1))
    batch = 32 * int(knobs.get("batch_scale", 1)) * accum
    return Recipe(
        batch=batch, lr=0.1 * float(knobs.get("lr_scale", 1.0)), accum=accum, plateau_at=plateau_at
    )


def write_injected(run_dir: Path, knobs: Mapping[str, Any] | None = None) -> None:
    """The ``injected.json`` of a run of :func:`script`: its optimizer and its training loader, and each knob the
    arm injected, acted (the recorded model trains with it)."""
    import json

    site = {"file": "/train.py", "line": 7, "code": "..."}
    acted = {
        k: {"value": v, "acted": True, "refused": False, "evidence": ["recorded"], "why": None}
        for k, v in (knobs or {}).items()
    }
    (run_dir / "injected.json").write_text(
        json.dumps(
            {
                "knobs": acted,
                "sites": {
                    "optimizer": {**site, "type": "SGD", "lr": 0.1},
                    "dataloader": {**site, "line": 5},
                },
                "loader": {"batch_size": 32},
            }
        )
    )


def applied_injection(spec: ScriptSpec, cand: Candidate) -> ScriptSpec:
    """The ``apply`` of a resolved convergence candidate: its knobs injected."""
    assert cand.patch is not None
    return spec.patch(inject=dict(cand.patch))


def resolved(index: int, k: int = 4) -> Candidate:
    """The script template ``index`` (0: batch × k, 1: accumulation × k, 2: the optimizer swap) made concrete for
    :func:`script`'s baseline (SGD at 0.1, batch 32), as ``resolve`` makes it from the baseline's run."""
    from advisors.quality.script_candidates import Baseline, resolve, templates

    site = {"file": "/train.py", "line": 7, "code": "..."}
    base = Baseline(
        {**site, "type": "SGD", "lr": 0.1}, {**site, "line": 5, "batch_size": 32}, None, None, 100
    )
    return resolve(templates(k)[index], base)


def resolve_from_runs(cand: Candidate, runs: Sequence[Any]) -> Candidate:
    """The ``resolve`` of ``to_quality``: from the baseline runs' ``injected.json`` (:func:`write_injected`)."""
    from advisors.quality.script_candidates import read_baseline, resolve

    return resolve(cand, read_baseline(runs))
