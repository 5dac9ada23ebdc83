"""How much of the machine other programs took while one A/B trial was timed (its contention).

A trial's host telemetry (``telemetry.jsonl``, 10 Hz) holds, per sample, the whole machine's busy share
(``system_cpu_pct``, 0–100 over ``cpu_count`` cores) and the trial's own process tree (``cpu_pct``, 100 = one
core); other programs took the difference, less Stepwise's own sampling (``monitor_cpu_pct``). The **mean** over the trial's timed span (its first measured step's
start to its last one's end) is the figure: a bursty neighbour busy for two of a trial's five seconds shows as
0.4 of a core, where a median would show nothing.

:data:`~advisors.compare.contention.CONTENDED_CORES` of a core or more taken by others marks the trial
*contended*: its time says as much about the neighbour as about the fix (a run of one spec at 177 ms beside its
twins at 105 ms, while another program held one of the two cores). On a GPU the NVML process list would say the same of other GPU jobs; the
host figure is what this machine can check. Whether a contended pair can still carry a verdict is the rule of
:mod:`advisors.compare.contention`, the one ``compare`` follows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisors.compare.contention import CONTENDED_CORES


@dataclass(frozen=True)
class TrialLoad:
    """Other programs' mean use of the machine during a trial's timed steps, and the machine's cores."""

    others_cores: float
    cores: int | None
    samples: int

    @property
    def contended(self) -> bool:
        return self.others_cores >= CONTENDED_CORES

    def text(self) -> str:
        of = f" of {self.cores}" if self.cores else ""
        return f"{self.others_cores:.2f}{of} cores"


def trial_load(
    telemetry: pd.DataFrame, steps: pd.DataFrame, first_step: int, last_step: int | None = None
) -> TrialLoad | None:
    """Other programs' mean cores over steps ``first_step ..= last_step`` (all later steps when ``None``) of the
    lowest rank; ``None`` when the trial recorded no host CPU figures (or no sample fell in its span)."""
    need = {"system_cpu_pct", "cpu_pct", "cpu_count", "t_unix_ns"}
    if telemetry is None or telemetry.empty or not need <= set(telemetry.columns) or steps.empty:
        return None
    host = telemetry[telemetry["source"].eq("host")] if "source" in telemetry.columns else telemetry
    rows = steps[steps["rank"] == steps["rank"].min()]
    rows = rows[
        (rows["step"] >= first_step)
        & ((rows["step"] <= last_step) if last_step is not None else True)
    ]
    start = pd.to_numeric(rows["t_unix_ns"], errors="coerce")
    end = start + pd.to_numeric(rows["wall_ms"], errors="coerce") * 1e6
    if start.dropna().empty or end.dropna().empty:
        return None
    t = pd.to_numeric(host["t_unix_ns"], errors="coerce")
    span = host[(t >= start.min()) & (t <= end.max())]
    cores = pd.to_numeric(span["cpu_count"], errors="coerce")
    busy = pd.to_numeric(span["system_cpu_pct"], errors="coerce") / 100.0 * cores
    ours = pd.to_numeric(span["cpu_pct"], errors="coerce") / 100.0
    if (
        "monitor_cpu_pct" in span.columns
    ):  # Stepwise's own sampling and launcher: no other program's
        ours = ours + pd.to_numeric(span["monitor_cpu_pct"], errors="coerce").fillna(0.0) / 100.0
    others = (busy - ours).clip(lower=0.0).dropna()
    if others.empty:
        return None
    n_cores = pd.to_numeric(host["cpu_count"], errors="coerce").dropna()
    return TrialLoad(
        others_cores=round(float(np.mean(others)), 3),
        cores=int(n_cores.median()) if len(n_cores) else None,
        samples=int(len(others)),
    )
