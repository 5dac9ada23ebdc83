"""Typed values for stored runs: their status, their index record and their result.

``RunResult`` mirrors ``result.json`` in a run folder (written by the worker, by the launcher's boot module,
or by the runner when a process died without a word). ``summarise_steps`` derives the measured part of a
result from the raw ``steps.jsonl`` / ``telemetry.jsonl`` rows, so that a run killed mid-way still reports
what it did.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from enum import Enum
from typing import Any, Literal, Mapping

import pandas as pd

from stepwise_agent.steady import choose_steps

RunKind = Literal["run", "launch", "upload", "experiment"]
RUN_KINDS: tuple[str, ...] = ("run", "launch", "upload", "experiment")
# The part a trial run plays in the experiment (``RunRecord.parent``) that started it.
TRIAL_ROLES: tuple[str, ...] = ("trial", "baseline", "patched", "reference", "diagnosis")

# Telemetry metric names (any source) that hold a memory amount in MiB; the largest value seen is the peak.
MEMORY_METRICS_MB: tuple[str, ...] = (
    "rss_mb", "host_rss_mb", "process_rss_mb", "gpu_memory_used_mb", "memory_used_mb", "cuda_allocated_mb",
    "mem_used_mb",  # NVML (profilers.telemetry.sampler.NvmlReader): device memory used, per GPU
)


class RunStatus(str, Enum):
    """Where a run stands. Every status but ``running`` is final."""

    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    OUT_OF_MEMORY = "out_of_memory"
    KILLED = "killed"

    @property
    def finished(self) -> bool:
        return self is not RunStatus.RUNNING

    @classmethod
    def parse(cls, value: object) -> "RunStatus":
        """A status from its stored text; anything unknown reads as ``failed`` (never a crash)."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.FAILED


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/Infinity become None (``result.json`` must stay strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _opt_float(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run: ``result.json``. Times in ms, memory in MiB, timestamps in Unix seconds."""

    status: RunStatus
    error: str | None = None
    steps_done: int = 0
    step_time_ms: float | None = None  # the run's one step time: median of the steady steps (stepwise_agent.steady)
    step_time_iqr_ms: float | None = None
    samples_per_s: float | None = None
    peak_memory_mb: float | None = None
    final_loss: float | None = None
    step_time_steps: int | None = None  # how many steps step_time_ms is the median of
    step_time_basis: str | None = None  # how they were chosen: "steady", or the wider basis of a short run
    profiled_step_time_ms: float | None = None  # the profiled window's own median: beside, never in its place
    device: str | None = None
    device_name: str | None = None
    world_size: int = 1
    telemetry_source: str | None = None
    telemetry_note: str | None = None
    warnings: tuple[str, ...] = ()
    started_unix: float | None = None
    finished_unix: float | None = None
    exit_code: int | None = None  # of the process the runner started; None when it did not watch one
    profiled_then_stopped: int | None = None  # a launched script stopped on purpose after this many profiled steps
    peak_memory_unprofiled_mb: float | None = None  # the peak of the unprofiled steps (the script's own need)
    peak_memory_profiled_mb: float | None = None  # the profiled window's peak (the profiler's events included)
    profile_cut: str | None = None  # why the memory guard cut the profile (the profiler's events outgrew …)

    def to_dict(self) -> dict[str, Any]:
        out = {k: _clean(v) for k, v in asdict(self).items()}
        out["status"] = self.status.value
        out["warnings"] = list(self.warnings)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunResult":
        """Tolerant reader: unknown keys are ignored, wrong types become None, a bad status reads ``failed``."""
        known = {f.name for f in fields(cls)}
        kw: dict[str, Any] = {k: data[k] for k in known if k in data}
        kw["status"] = RunStatus.parse(data.get("status"))
        for name in ("step_time_ms", "step_time_iqr_ms", "samples_per_s", "peak_memory_mb", "final_loss",
                     "started_unix", "finished_unix", "profiled_step_time_ms"):
            kw[name] = _opt_float(kw.get(name))
        for name, default in (("steps_done", 0), ("world_size", 1)):
            kw[name] = int(_opt_float(kw.get(name)) or default)
        for name in ("exit_code", "profiled_then_stopped", "step_time_steps"):
            value = _opt_float(kw.get(name))
            kw[name] = None if value is None else int(value)
        for name in ("error", "device", "device_name", "telemetry_source", "telemetry_note", "step_time_basis"):
            kw[name] = None if kw.get(name) is None else str(kw[name])
        for name in ("peak_memory_unprofiled_mb", "peak_memory_profiled_mb"):  # the profiler's cost apart
            kw[name] = _opt_float(kw.get(name))
        kw["profile_cut"] = None if kw.get("profile_cut") is None else str(kw["profile_cut"])
        warnings = kw.get("warnings") or ()
        kw["warnings"] = tuple(str(w) for w in warnings) if isinstance(warnings, (list, tuple)) else (str(warnings),)
        return cls(**kw)

    def with_(self, **changes: Any) -> "RunResult":
        return replace(self, **changes)


@dataclass(frozen=True)
class RunRecord:
    """One row of the run index (what the run list shows). ``run_dir`` is the folder, the truth."""

    run_id: str
    kind: str
    label: str
    workload: str | None
    status: RunStatus
    created_unix: float
    finished_unix: float | None
    run_dir: str
    step_time_ms: float | None = None
    samples_per_s: float | None = None
    peak_memory_mb: float | None = None
    world_size: int = 1
    device: str | None = None
    error: str | None = None
    pid: int | None = None
    parent: str | None = None  # a trial run: the experiment (run id) it belongs to; hidden from lists by default
    role: str | None = None  # a trial run's part in it (``TRIAL_ROLES``)
    source_run: str | None = None  # an experiment: the run it was started from


@dataclass(frozen=True)
class StepSummary:
    """The measured part of a :class:`RunResult`, derived from raw step rows by :func:`summarise_steps`.

    ``step_time_ms`` is the run's one step time: the median measured step (see :func:`summarise_steps`)."""

    steps_done: int = 0
    step_time_ms: float | None = None
    step_time_iqr_ms: float | None = None
    samples_per_s: float | None = None
    final_loss: float | None = None
    peak_memory_mb: float | None = None
    step_time_steps: int | None = None
    step_time_basis: str | None = None
    profiled_step_time_ms: float | None = None
    data_wait_share: float | None = None  # of the timed steps' time, drawing batches (no profiler): data fixes' reach

    def result_fields(self) -> dict[str, Any]:
        """The fields as keyword arguments of :class:`RunResult`."""
        return {k: v for k, v in asdict(self).items() if k != "data_wait_share"}

    def with_peak(self, peak_memory_mb: float | None) -> "StepSummary":
        return replace(self, peak_memory_mb=peak_memory_mb)


def summarise_steps(steps: pd.DataFrame, telemetry: pd.DataFrame, warmup_steps: int = 1) -> StepSummary:
    """Measured fields of a :class:`RunResult` from raw step rows (columns of ``RunStore.read_steps``).

    A step counts as done when every rank that reported anything reported it. Its time is the slowest rank's
    ``wall_ms`` (the ranks wait for each other); its samples are summed over ranks. The median and IQR are over
    the steady steps that :func:`stepwise_agent.steady.choose_steps` picks (past ``warmup_steps``, at least
    one; not profiled; not next to the profiler's window), the same steps the worker times.
    """
    peak = _peak_mb(telemetry)
    if steps.empty:
        return StepSummary(peak_memory_mb=peak)
    ranks = steps["rank"].nunique()
    per_step = steps.groupby("step").agg(
        n=("rank", "nunique"), wall_ms=("wall_ms", "max"), samples=("samples", "sum"),
        profiled=("profiled", "max"), loss=("loss", "mean"),
        **({"data_ms": ("data_ms", lambda v: v.max(skipna=False))} if "data_ms" in steps.columns else {}),
    ).sort_index()
    done = per_step[per_step["n"] >= ranks]
    if done.empty:
        return StepSummary(peak_memory_mb=peak)
    losses = done["loss"].dropna()
    final_loss = _opt_float(losses.iloc[-1]) if len(losses) else None
    choice = choose_steps([int(i) for i in done.index], done["profiled"].fillna(False).astype(bool).tolist(),
                          warmup_steps)
    measured = done.iloc[list(choice.positions)]
    profiled = done.iloc[list(choice.profiled)]["wall_ms"].dropna()
    walls = measured["wall_ms"].dropna()
    base = StepSummary(steps_done=int(len(done)), final_loss=final_loss, peak_memory_mb=peak,
                       profiled_step_time_ms=_opt_float(profiled.median()) if len(profiled) else None)
    if walls.empty:
        return base
    total_s = float(walls.sum()) / 1000.0
    samples = float(measured.loc[walls.index, "samples"].fillna(0).sum())
    data = measured.loc[walls.index, "data_ms"] if "data_ms" in measured.columns else pd.Series(dtype="float64")
    share = float(data.sum()) / float(walls.sum()) if data.notna().all() and len(data) and walls.sum() > 0 else None
    return replace(base, step_time_ms=_opt_float(walls.median()), data_wait_share=_opt_float(share),
                   step_time_iqr_ms=_opt_float(walls.quantile(0.75) - walls.quantile(0.25)),
                   step_time_steps=int(len(walls)), step_time_basis=choice.basis,
                   samples_per_s=_opt_float(samples / total_s) if total_s > 0 and samples > 0 else None)


def _peak_mb(telemetry: pd.DataFrame) -> float | None:
    """Largest memory amount sampled; on a GPU run (NVML lines present) the device's, not the host's RSS."""
    if "source" in telemetry.columns and telemetry["source"].eq("nvml").any():
        telemetry = telemetry[telemetry["source"].eq("nvml")]
    cols = [c for c in MEMORY_METRICS_MB if c in telemetry.columns]
    if telemetry.empty or not cols:
        return None
    return _opt_float(telemetry[cols].apply(pd.to_numeric, errors="coerce").max().max())
