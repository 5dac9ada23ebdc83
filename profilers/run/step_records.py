"""A run's step records as its agent left them: whole rows and, for a watched run, roll-ups
(:mod:`stepwise_agent.step_log` writes them; this module is where every reader gets them).

- :func:`step_rows`: the whole rows — ``steps.jsonl`` and the rows a killed watched run left undecided in
  ``steps_open.rank{R}.jsonl`` (those past the last step the two other files cover: a row is never read twice);
- :func:`rollups`: ``steps_rollup.jsonl``, a summary per minute (or per 1,000 steps) of the steps a long watched
  run did not keep whole;
- :func:`timeline`: the whole run as one frame over time, a point per whole step and one per roll-up
  (``first_step``, ``last_step``, ``steps``, ``t_unix_ns``, ``wall_ms`` — a roll-up's median —, ``wall_ms_p10``,
  ``wall_ms_p90``, ``data_share``, ``loss``, ``rolled``), the frame the live page's and the report's charts draw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from profilers.store.files import read_jsonl
from stepwise_agent.step_log import OPEN, ROLLUPS, STEPS

TIMELINE_COLUMNS = (
    "rank",
    "first_step",
    "last_step",
    "steps",
    "t_unix_ns",
    "wall_ms",
    "wall_ms_p10",
    "wall_ms_p90",
    "data_share",
    "loss",
    "rolled",
)


def rollups(run_dir: Path) -> list[dict[str, Any]]:
    """The roll-ups of a watched run (none for any other run), in the order they were written."""
    return [
        r
        for r in read_jsonl(run_dir / ROLLUPS)
        if isinstance(r.get("first_step"), int) and isinstance(r.get("last_step"), int)
    ]


def step_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every whole step row of a run (see the module docs); read with :func:`profilers.store.files.steps_frame`."""
    rows = read_jsonl(run_dir / STEPS)
    opened = [r for path in sorted(run_dir.glob(OPEN.format(rank="*"))) for r in read_jsonl(path)]
    if not opened:
        return rows
    covered: dict[int, int] = {}
    for r in rows:
        if isinstance(r.get("step"), int):
            covered[int(r.get("rank") or 0)] = max(
                covered.get(int(r.get("rank") or 0), -1), r["step"]
            )
    for r in rollups(run_dir):
        covered[int(r.get("rank") or 0)] = max(
            covered.get(int(r.get("rank") or 0), -1), r["last_step"]
        )
    return rows + [
        r
        for r in opened
        if isinstance(r.get("step"), int) and r["step"] > covered.get(int(r.get("rank") or 0), -1)
    ]


def rolled_steps(run_dir: Path) -> int:
    """How many steps of a run live only in roll-ups (the slowest rank's count, as steps done counts a step once
    every rank did it)."""
    per_rank: dict[int, int] = {}
    for r in rollups(run_dir):
        per_rank[int(r.get("rank") or 0)] = per_rank.get(int(r.get("rank") or 0), 0) + int(
            r.get("steps") or 0
        )
    return min(per_rank.values()) if per_rank else 0


def timeline(run_dir: Path, rank: int | None = None) -> pd.DataFrame:
    """The whole run, a point per whole step and one per roll-up, in step order (one rank: ``rank``, else the
    lowest that recorded anything)."""
    points: list[dict[str, Any]] = []
    for r in step_rows(run_dir):
        wall, data = r.get("wall_ms"), r.get("data_ms")
        share = (
            data / wall
            if isinstance(data, (int, float)) and isinstance(wall, (int, float)) and wall > 0
            else None
        )
        points.append(
            {
                "rank": r.get("rank", 0),
                "first_step": r.get("step"),
                "last_step": r.get("step"),
                "steps": 1,
                "t_unix_ns": r.get("t_unix_ns"),
                "wall_ms": wall,
                "wall_ms_p10": wall,
                "wall_ms_p90": wall,
                "data_share": share,
                "loss": r.get("loss"),
                "rolled": False,
            }
        )
    for r in rollups(run_dir):
        points.append(
            {
                "rank": r.get("rank", 0),
                "first_step": r["first_step"],
                "last_step": r["last_step"],
                "steps": r.get("steps"),
                "t_unix_ns": r.get("t_unix_ns"),
                "wall_ms": r.get("wall_ms_median"),
                "wall_ms_p10": r.get("wall_ms_p10"),
                "wall_ms_p90": r.get("wall_ms_p90"),
                "data_share": r.get("data_share"),
                "loss": r.get("loss_last"),
                "rolled": True,
            }
        )
    df = pd.DataFrame.from_records(points, columns=list(TIMELINE_COLUMNS))
    if df.empty:
        return df
    for col in ("rank", "first_step", "last_step", "steps"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df = df.dropna(subset=["rank", "first_step", "last_step"])
    for col in ("wall_ms", "wall_ms_p10", "wall_ms_p90", "data_share", "loss", "t_unix_ns"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    df = df[df["rank"] == (int(df["rank"].min()) if rank is None else rank)]
    df = df.drop_duplicates(subset=["first_step"], keep="first")
    return (
        df.astype({"rank": "int64", "first_step": "int64", "last_step": "int64"})
        .sort_values("first_step")
        .reset_index(drop=True)
    )
