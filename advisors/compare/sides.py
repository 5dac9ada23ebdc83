"""One side of a comparison from anything ``analyze`` takes: a trace, a folder of ranks, a zip, a run folder —
read from the input's one analysis (:func:`advisors.analysis.analyse`; a run's stored one), as every door reads it.

A stored run must have ended ``ok``: the steps of a run that failed, ran out of memory or was killed do not
stand for its spec, so comparing them would judge the crash, not the speed (a StepwiseError says so, which
the command line turns into exit code 2). A memory snapshot has no step time and is refused the same way.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from advisors.analysis import Analysis, analyse
from advisors.compare.contention import host_cpu
from advisors.verdict import Diagnosis
from advisors.observation import RunFacts
from advisors.compare.regression import Side, rank_views, side
from advisors.compare.step_samples import run_samples, trace_samples
from profilers.trace.breakdown import Breakdown
from profilers.errors import RunError, StepwiseError


def observe_side(path: str | Path, label: str | None = None) -> Side:
    """Analyse ``path`` (raises TraceError/RunError/StepwiseError for what cannot be compared). A folder of rank
    files is read as its ranks' summaries (cached, so comparing a job again reads no events), which reduce to the
    very breakdown of loading them all; a stored run's analysis is read from its folder."""
    return side_of(analyse(path, label or str(path), charts=False))


def side_of(a: Analysis) -> Side:
    """The side of an analysis (the dashboard's, or :func:`observe_side`'s)."""
    return side_from_parts(
        a.label,
        a.run,
        a.steps,
        a.breakdown,
        a.diagnosis,
        is_snapshot=a.snapshot is not None,
        ranks=rank_views(a.job),
    )


def side_from_parts(
    label: str,
    run: RunFacts | None,
    steps: pd.DataFrame,
    breakdown: Breakdown | None,
    diagnosis: Diagnosis | None,
    is_snapshot: bool = False,
    ranks: dict[str, Any] | None = None,
) -> Side:
    """A side from what was read already (the dashboard's cached analysis, or :func:`observe_side`); ``ranks``:
    :func:`~advisors.compare.regression.rank_views` of its ``job``."""
    if is_snapshot:
        raise StepwiseError(
            f"{label}: a memory snapshot records no step time, so there is nothing to compare"
        )
    samples = None
    if run is not None:
        if run.status != "ok":
            why = f" ({_one_line(run.error)})" if run.error else ""
            raise RunError(
                f"{label}: the run ended {run.status}{why}; its steps do not stand for its spec, "
                "so its speed cannot be compared"
            )
        samples = run_samples(steps, run.spec, run.measured_window)
        if samples is None and (fallback := trace_samples(breakdown)) is not None:
            samples = replace(
                fallback, what=f"{fallback.what} of its trace (it recorded no measured steps)"
            )
    else:
        samples = trace_samples(breakdown)
    if samples is None:
        raise StepwiseError(f"{label}: no step with a time in it, so there is nothing to compare")
    device = breakdown.device if breakdown is not None else _device(run.device if run else None)
    return side(
        label,
        samples,
        diagnosis,
        breakdown,
        device,
        host_cpu(run.telemetry) if run is not None else None,
        ranks,
    )


def _device(run_device: str | None) -> str | None:
    """A run's device in the breakdown's words (``gpu`` | ``cpu``), so a run and a trace compare."""
    if run_device is None:
        return None
    return "gpu" if run_device.startswith("cuda") else run_device


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
