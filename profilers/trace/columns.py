"""Typed event frames from raw columns: the pandas half of the column work (see :mod:`profilers.trace.raw_columns`
for the half a parse worker does: reading values, validating, dropping and counting broken events, interning).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pandas.api.types import union_categoricals

from profilers.trace.kinds import KINDS
from profilers.trace.raw_columns import RawColumns, merge


@dataclass
class RankColumns:
    """Columns of one rank's events, plus what was dropped and why."""

    events: pd.DataFrame
    memory: pd.DataFrame
    dropped: dict[str, int] = field(default_factory=dict)
    shortened: int = (
        0  # distinct event names longer than raw_columns.MAX_NAME_CHARS, kept shortened
    )
    processes: tuple[str, ...] = ()  # the metadata events' process names and labels


def rank_columns(parts: list[RawColumns]) -> RankColumns:
    """One rank's frames from its chunks' raw columns (in file order), wherever they were read."""
    raw = merge(parts)
    events = pd.DataFrame(
        {
            "kind": pd.Categorical.from_codes(raw.kind, categories=pd.Index(KINDS)),
            "name": _categorical(raw.name.codes, raw.name.uniques),
            "start_ns": raw.start_ns,
            "dur_ns": raw.dur_ns,
            "end_ns": raw.start_ns + raw.dur_ns,
            "pid": raw.pid,
            "tid": _categorical(raw.tid.codes, raw.tid.uniques),
            "device": raw.device,
            "stream": raw.stream,
            "correlation": raw.correlation,
            "dtype": _categorical(raw.dtype.codes, raw.dtype.uniques),
            "shapes": _categorical(raw.shapes.codes, raw.shapes.uniques),
        }
    )
    return RankColumns(
        events, pd.DataFrame(raw.memory), dict(raw.dropped), len(raw.shortened), raw.processes
    )


def _categorical(codes: Any, uniques: list[Any]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object))


def concat_frames(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate event frames whose categorical columns have different categories."""
    if len(frames) == 1:
        return frames[0]
    for col in ("name", "tid", "dtype", "shapes"):
        cats = union_categoricals([f[col] for f in frames]).categories
        frames = [f.assign(**{col: pd.Categorical(f[col], categories=cats)}) for f in frames]
    return pd.concat(frames, ignore_index=True)
