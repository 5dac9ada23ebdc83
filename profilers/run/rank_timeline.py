"""A watched run's ranks over the whole run: each rank's step wall and its own work per step (the wall minus its
time inside backward, :func:`profilers.run.rank_watch.work_ms`), with the run's captures — what the Job page draws
(:func:`reports.charts.ranks.ranks_over_time`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from profilers.run.captures import capture_records
from profilers.run.rank_watch import work_ms
from profilers.store.files import read_jsonl

COLUMNS = ["rank", "step", "wall_ms", "work_ms", "profiled"]
MAX_POINTS = 2000  # per rank: a longer run is drawn as the median of each bucket of steps


def rank_steps(run_dir: Path) -> pd.DataFrame:
    """One row per rank and step (``rank``, ``step``, ``wall_ms``, ``work_ms``: None where the agent measured no
    backward, ``profiled``), in step order; a long run's steps are bucketed to :data:`MAX_POINTS` per rank (each
    bucket's median, at its first step; profiled when any of its steps was)."""
    rows = [{"rank": int(r.get("rank") or 0), "step": int(r["step"]), "wall_ms": r.get("wall_ms"),
             "work_ms": work_ms(r), "profiled": bool(r.get("profiled"))}
            for r in read_jsonl(run_dir / "steps.jsonl") if isinstance(r.get("step"), int)]
    frame = pd.DataFrame(rows, columns=COLUMNS).sort_values(["rank", "step"], kind="stable")
    frame[["wall_ms", "work_ms"]] = frame[["wall_ms", "work_ms"]].astype(float)
    steps = int(frame["step"].max()) + 1 if len(frame) else 0
    if steps <= MAX_POINTS:
        return frame.reset_index(drop=True)
    size = -(-steps // MAX_POINTS)
    frame["bucket"] = frame["step"] // size
    out = frame.groupby(["rank", "bucket"], as_index=False).agg(
        step=("step", "min"), wall_ms=("wall_ms", "median"), work_ms=("work_ms", "median"),
        profiled=("profiled", "any"))
    return out[COLUMNS]


def rank_timeline(run_dir: Path) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The ranks' steps (:func:`rank_steps`) and the run's captures (:func:`capture_records`)."""
    return rank_steps(run_dir), capture_records(run_dir)
