"""What a run's telemetry says about its steady steps, in a few numbers the advisor can judge.

Samples are kept only while a steady step was running: after the warm-up (the first step) and outside the
profiler's collecting window unless fewer than three steps lie outside it (a launched script profiles
nearly all its steps), the same steps :func:`profilers.run.records.summarise_steps` times. Each step's
interval comes from ``steps.jsonl`` (``t_unix_ns`` at its start, ``wall_ms`` long) and telemetry carries the
same wall clock (``t_unix_ns``), so no clock has to be guessed. Without step rows every sample counts.

Host CPU saturation is the fraction of the machine's cores that were busy: ``system_cpu_pct`` (psutil's
whole-machine figure, 0–100) when the sampler recorded it, else the training process tree's ``cpu_pct``
(100 = one core) over ``cpu_count`` cores. Older runs that recorded neither core count nor system figure
have no saturation: the advisor then says it cannot judge, rather than guess the core count of the machine
that made the run.

The run's own demand is another figure: the CPU its process tree used (``cpu_pct``) over the cores it could
have — its CPU affinity (``cpu_affinity``, recorded by the sampler) when smaller than the machine —
:attr:`TelemetrySummary.run_cpu_busy`. What the machine was busy with beyond that, other programs used
(:attr:`TelemetrySummary.other_cores`): a host 93% busy while the run got 0.13 of its 2 cores is contention,
not a run that saturates its host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

MIN_PLAIN_STEPS = 3  # as in profilers.run.records.summarise_steps


@dataclass(frozen=True)
class TelemetrySummary:
    """Medians (and the memory maximum) over the samples taken during steady steps. ``None``: not recorded."""

    source: str | None  # "nvml" | "host" | None
    samples: int  # samples inside steady steps
    rate_hz: float | None  # samples per second over the whole recording
    cpu_count: int | None = None
    process_cpu_pct: float | None = None  # training process tree, 100 = one core
    system_cpu_pct: float | None = None  # whole machine, 0..100
    read_mb_s: float | None = None
    gpu_util_pct: float | None = None  # NVML, mean over GPUs of each sample, then the median
    gpu_mem_used_mb: float | None = None  # NVML, largest value of any GPU
    gpu_mem_total_mb: float | None = None
    power_w: float | None = None
    cpu_affinity: int | None = (
        None  # cores the run's process may run on (its CPU affinity), when recorded
    )
    in_steps: bool = True  # False: no step was measured, so the samples are the whole recording's

    @property
    def run_cores(self) -> float | None:
        """Cores the run's process tree used (median over steady steps), or ``None`` when not recorded."""
        return None if self.process_cpu_pct is None else self.process_cpu_pct / 100.0

    @property
    def usable_cores(self) -> int | None:
        """The cores the run could have: its CPU affinity when recorded and smaller, else the machine's."""
        if self.cpu_affinity and self.cpu_count:
            return min(self.cpu_affinity, self.cpu_count)
        return self.cpu_count or self.cpu_affinity

    @property
    def run_cpu_busy(self) -> float | None:
        """Fraction (0..1) of the run's usable cores its own process tree kept busy: the run's own demand."""
        ours, usable = self.run_cores, self.usable_cores
        return None if ours is None or not usable else min(ours / usable, 1.0)

    @property
    def other_cores(self) -> float | None:
        """Cores other programs used during the steady steps (the machine's busy cores less the run's)."""
        if self.system_cpu_pct is None or not self.cpu_count or self.run_cores is None:
            return None
        return max(0.0, self.system_cpu_pct / 100.0 * self.cpu_count - self.run_cores)

    @property
    def host_cpu_busy(self) -> float | None:
        """Fraction (0..1) of the machine's cores busy during steady steps, or ``None`` when unknown."""
        if self.system_cpu_pct is not None:
            return min(self.system_cpu_pct / 100.0, 1.0)
        if self.process_cpu_pct is not None and self.cpu_count:
            return min(self.process_cpu_pct / (100.0 * self.cpu_count), 1.0)
        return None

    @property
    def gpu_mem_used_share(self) -> float | None:
        if self.gpu_mem_used_mb is None or not self.gpu_mem_total_mb:
            return None
        return self.gpu_mem_used_mb / self.gpu_mem_total_mb

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items()}
        out["host_cpu_busy"] = self.host_cpu_busy
        out["run_cpu_busy"] = None if self.run_cpu_busy is None else round(self.run_cpu_busy, 4)
        out["other_cores"] = None if self.other_cores is None else round(self.other_cores, 3)
        out["gpu_mem_used_share"] = self.gpu_mem_used_share
        return out

    def describe(self) -> str:
        return describe_telemetry(self.as_dict())


def describe_telemetry(tel: dict[str, Any]) -> str:
    """One line of what a run's telemetry saw during its steady steps, from :meth:`TelemetrySummary.as_dict`."""
    parts = [
        f"{tel['source'] or 'unknown'} at {tel['rate_hz']:.1f} Hz"
        if tel.get("rate_hz")
        else f"{tel['source'] or 'unknown'}",
        f"{tel['samples']} samples in steady steps"
        if tel.get("in_steps", True)
        else f"{tel['samples']} samples over the whole run (no step was measured)",
    ]
    if tel.get("host_cpu_busy") is not None:
        cores = f"{tel['cpu_count']} host cores" if tel.get("cpu_count") else "host cores"
        own = tel.get("run_cpu_busy")
        # the whole host's busy share and the run's own share of its cores are two numbers: both named, so a
        # verdict quoting the run's own share never reads as a contradiction of this line
        mine = (
            f" (this run's processes {100 * own:.0f}% of its cores)"
            if own is not None and abs(own - tel["host_cpu_busy"]) >= 0.05
            else ""
        )
        parts.append(f"{cores} {100 * tel['host_cpu_busy']:.0f}% busy{mine}")
    if tel.get("gpu_util_pct") is not None:
        parts.append(f"GPU utilisation {tel['gpu_util_pct']:.0f}%")
    if tel.get("gpu_mem_used_share") is not None:
        parts.append(f"GPU memory {100 * tel['gpu_mem_used_share']:.0f}% used at most")
    return ", ".join(parts)


def summarise_telemetry(
    telemetry: pd.DataFrame, steps: pd.DataFrame | None = None
) -> TelemetrySummary | None:
    """Summary of ``telemetry`` (``store_io.telemetry_frame``) over the steady steps of ``steps``
    (``store_io.steps_frame``; without any step, over the whole recording: ``in_steps`` says
    which); ``None`` when the run recorded no telemetry."""
    if telemetry is None or telemetry.empty:
        return None
    t = pd.to_numeric(telemetry["t_unix_ns"], errors="coerce")
    times = (
        t.dropna().unique()
    )  # NVML writes one row per GPU per sample, all with the sample's time
    span_s = (times.max() - times.min()) / 1e9 if len(times) >= 2 else 0.0
    rate = (len(times) - 1) / span_s if span_s > 0 else None
    kept = (
        telemetry[_in_steady_steps(t, steps)]
        if steps is not None and not steps.empty
        else telemetry
    )
    sources: list[str] = (
        telemetry["source"].dropna().astype(str).unique().tolist() if "source" in telemetry else []
    )
    return TelemetrySummary(
        source="+".join(sources) if len(sources) else None,  # "nvml+host" on a GPU run
        samples=int(kept["t_unix_ns"].nunique()),
        rate_hz=_round(rate),
        # the machine's cores are known from any sample: a script whose steps are shorter than the sampling
        # period has no sample inside them, yet its host has cores
        cpu_count=_int(_median(telemetry, "cpu_count")),
        process_cpu_pct=_median(kept, "cpu_pct"),
        system_cpu_pct=_median(kept, "system_cpu_pct"),
        read_mb_s=_median(kept, "read_mb_s"),
        gpu_util_pct=_median(_per_sample_mean(kept, "gpu_util_pct"), "gpu_util_pct"),
        gpu_mem_used_mb=_max(kept, "mem_used_mb"),
        gpu_mem_total_mb=_max(kept, "mem_total_mb"),
        power_w=_median(kept, "power_w"),
        cpu_affinity=_int(_median(telemetry, "cpu_affinity")),
        in_steps=steps is not None and not steps.empty,
    )


def _in_steady_steps(t: pd.Series, steps: pd.DataFrame) -> np.ndarray:
    """Mask of samples that fall inside a steady step of rank 0 (or of the lowest rank present)."""
    rank = int(steps["rank"].min())
    rows = steps[steps["rank"] == rank].sort_values("step")
    rows = rows.iloc[1:] if len(rows) > 1 else rows  # the first step carries lazy initialisation
    plain = rows[~rows["profiled"].astype(bool)]
    rows = (
        plain if len(plain) >= MIN_PLAIN_STEPS else rows
    )  # a launched script profiles nearly every step
    start = pd.to_numeric(rows["t_unix_ns"], errors="coerce")
    end = start + pd.to_numeric(rows["wall_ms"], errors="coerce") * 1e6
    ok = start.notna() & end.notna()
    starts, ends = start[ok].to_numpy(dtype="float64"), end[ok].to_numpy(dtype="float64")
    if not len(starts):
        return np.ones(len(t), dtype=bool)
    order = np.argsort(starts)
    starts, ends = starts[order], ends[order]
    values = t.to_numpy(dtype="float64")
    i = (
        np.searchsorted(starts, values, side="right") - 1
    )  # the last step that started before the sample
    inside = (i >= 0) & (values <= ends[np.clip(i, 0, None)])
    return inside & ~np.isnan(values)


def _per_sample_mean(df: pd.DataFrame, col: str) -> pd.DataFrame:
    if col not in df.columns:
        return df
    return df.groupby("t_unix_ns", as_index=False)[[col]].mean()


def _median(df: pd.DataFrame, col: str) -> float | None:
    if col not in df.columns:
        return None
    values = pd.to_numeric(df[col], errors="coerce").dropna()
    return _round(float(values.median())) if len(values) else None


def _max(df: pd.DataFrame, col: str) -> float | None:
    if col not in df.columns:
        return None
    values = pd.to_numeric(df[col], errors="coerce").dropna()
    return _round(float(values.max())) if len(values) else None


def _int(value: float | None) -> int | None:
    return None if value is None else int(round(value))


def _round(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 3)
