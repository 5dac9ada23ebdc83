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

from stepwise_agent import steady
from stepwise_agent.steady import choose_steps

RunKind = Literal["run", "launch", "upload", "experiment"]
RUN_KINDS: tuple[str, ...] = ("run", "launch", "upload", "experiment")
# The part a trial run plays in the experiment (``RunRecord.parent``) that started it.
TRIAL_ROLES: tuple[str, ...] = ("trial", "baseline", "patched", "reference", "diagnosis")

# Telemetry metric names (any source) that hold a memory amount in MiB; the largest value seen is the peak.
MEMORY_METRICS_MB: tuple[str, ...] = (
    "rss_mb",
    "host_rss_mb",
    "process_rss_mb",
    "gpu_memory_used_mb",
    "memory_used_mb",
    "cuda_allocated_mb",
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
    # the run's time per step: elapsed ÷ steps over the steady steps (steady)
    step_time_ms: float | None = None
    step_time_iqr_ms: float | None = None
    samples_per_s: float | None = None
    peak_memory_mb: float | None = None
    final_loss: float | None = None
    step_time_steps: int | None = None  # how many steps step_time_ms is measured over
    step_time_basis: str | None = (
        None  # how they were chosen: "steady", or the wider basis of a short run
    )
    profiled_step_time_ms: float | None = (
        None  # the profiled window's own median: beside, never in its place
    )
    device: str | None = None
    device_name: str | None = None
    world_size: int = 1
    telemetry_source: str | None = None
    telemetry_note: str | None = None
    warnings: tuple[str, ...] = ()
    started_unix: float | None = None
    finished_unix: float | None = None
    exit_code: int | None = (
        None  # of the process the runner started; None when it did not watch one
    )
    profiled_then_stopped: int | None = (
        None  # a launched script stopped on purpose after this many profiled steps
    )
    peak_memory_unprofiled_mb: float | None = (
        None  # the peak of the unprofiled steps (the script's own need)
    )
    peak_memory_profiled_mb: float | None = (
        None  # the profiled window's peak (the profiler's events included)
    )
    profile_cut: str | None = (
        None  # why the memory guard cut the profile (the profiler's events outgrew …)
    )
    typical_step_ms: float | None = None  # the median measured step: a step that did not stall
    # of the measured steps, those over steady.STALL_FACTOR typical steps
    stalled_share: float | None = None

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
        for name in (
            "step_time_ms",
            "step_time_iqr_ms",
            "samples_per_s",
            "peak_memory_mb",
            "final_loss",
            "started_unix",
            "finished_unix",
            "profiled_step_time_ms",
            "typical_step_ms",
            "stalled_share",
        ):
            kw[name] = _opt_float(kw.get(name))
        for name, default in (("steps_done", 0), ("world_size", 1)):
            kw[name] = int(_opt_float(kw.get(name)) or default)
        for name in ("exit_code", "profiled_then_stopped", "step_time_steps"):
            value = _opt_float(kw.get(name))
            kw[name] = None if value is None else int(value)
        for name in (
            "error",
            "device",
            "device_name",
            "telemetry_source",
            "telemetry_note",
            "step_time_basis",
        ):
            kw[name] = None if kw.get(name) is None else str(kw[name])
        for name in (
            "peak_memory_unprofiled_mb",
            "peak_memory_profiled_mb",
        ):  # the profiler's cost apart
            kw[name] = _opt_float(kw.get(name))
        kw["profile_cut"] = None if kw.get("profile_cut") is None else str(kw["profile_cut"])
        warnings = kw.get("warnings") or ()
        kw["warnings"] = (
            tuple(str(w) for w in warnings)
            if isinstance(warnings, (list, tuple))
            else (str(warnings),)
        )
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
    parent: str | None = (
        None  # a trial run: the experiment (run id) it belongs to; hidden from lists by default
    )
    role: str | None = None  # a trial run's part in it (``TRIAL_ROLES``)
    source_run: str | None = None  # an experiment: the run it was started from


@dataclass(frozen=True)
class StepSummary:
    """The measured part of a :class:`RunResult`, derived from raw step rows by :func:`summarise_steps`.

    ``step_time_ms`` is the run's time per step: its measured steps' elapsed time over their count
    (see :func:`summarise_steps`); ``typical_step_ms`` their median, beside it."""

    steps_done: int = 0
    step_time_ms: float | None = None
    step_time_iqr_ms: float | None = None
    samples_per_s: float | None = None
    final_loss: float | None = None
    peak_memory_mb: float | None = None
    step_time_steps: int | None = None
    step_time_basis: str | None = None
    profiled_step_time_ms: float | None = None
    data_wait_share: float | None = (
        None  # of the timed steps' time, drawing batches (no profiler): data fixes' reach
    )
    typical_step_ms: float | None = None
    stalled_share: float | None = None

    def result_fields(self) -> dict[str, Any]:
        """The fields as keyword arguments of :class:`RunResult`."""
        return {k: v for k, v in asdict(self).items() if k != "data_wait_share"}

    def with_peak(self, peak_memory_mb: float | None) -> "StepSummary":
        return replace(self, peak_memory_mb=peak_memory_mb)


@dataclass(frozen=True)
class MeasuredSteps:
    """The steps a run is measured on — the same for its own result, the Runs list and an A/B trial — with
    each step's time (its slowest rank's), samples (summed over ranks) and batch-drawing time (its slowest
    rank's, ``None`` when a rank did not record it)."""

    steps: tuple[int, ...]
    walls_ms: tuple[float, ...]
    samples: tuple[float, ...]
    data_ms: tuple[float, ...] | None
    basis: str  # how they were chosen (:mod:`stepwise_agent.steady`)

    @property
    def step_time_ms(self) -> float:
        """The run's time per step (:func:`stepwise_agent.steady.time_per_step`): elapsed ÷
        steps."""
        return steady.time_per_step(self.walls_ms) or 0.0

    @property
    def typical_step_ms(self) -> float:
        """The median measured step (:func:`stepwise_agent.steady.typical_step`)."""
        return steady.typical_step(self.walls_ms) or 0.0

    @property
    def stalled_share(self) -> float:
        return steady.stalled_share(self.walls_ms) or 0.0

    @property
    def samples_per_s(self) -> float | None:
        """The run's one samples/s (:func:`stepwise_agent.steady.samples_per_s`)."""
        return steady.samples_per_s(self.samples, self.walls_ms)


def done_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per step every rank reported, in step order: ``wall_ms`` (the slowest rank's: the ranks wait for
    each other), ``samples`` (summed over ranks), ``profiled``, ``loss`` (mean over ranks), ``data_ms``."""
    if steps.empty:
        return pd.DataFrame(columns=["n", "wall_ms", "samples", "profiled", "loss", "data_ms"])
    ranks = steps["rank"].nunique()
    per_step = (
        steps.groupby("step")
        .agg(
            n=("rank", "nunique"),
            wall_ms=("wall_ms", "max"),
            samples=("samples", "sum"),
            profiled=("profiled", "max"),
            **({"loss": ("loss", "mean")} if "loss" in steps.columns else {}),
            **(
                {"data_ms": ("data_ms", lambda v: v.max(skipna=False))}
                if "data_ms" in steps.columns
                else {}
            ),
        )
        .sort_index()
    )
    return per_step[per_step["n"] >= ranks]


def measured_steps(steps: pd.DataFrame, warmup_steps: int = 1) -> MeasuredSteps | None:
    """The measured steps of a run's raw step rows (columns of ``RunStore.read_steps``): the steady steps
    :func:`stepwise_agent.steady.choose_steps` picks (past ``warmup_steps`` counted from step 0, at least one;
    not profiled; not next to the profiler's window), or ``None`` when no step with a usable time is left.
    A run's step time, its samples/s and an A/B trial's are all read from here."""
    done = done_steps(steps)
    if done.empty:
        return None
    choice = choose_steps(
        [int(i) for i in done.index],
        done["profiled"].fillna(False).astype(bool).tolist(),
        warmup_steps,
        first_step=0,
    )
    chosen = done.iloc[list(choice.positions)]
    chosen = chosen[
        chosen["wall_ms"].map(lambda w: isinstance(w, (int, float)) and math.isfinite(w) and w > 0)
    ]
    if chosen.empty:
        return None
    data = chosen["data_ms"] if "data_ms" in chosen.columns else None
    return MeasuredSteps(
        steps=tuple(int(i) for i in chosen.index),
        walls_ms=tuple(float(w) for w in chosen["wall_ms"]),
        samples=tuple(float(x) for x in chosen["samples"].fillna(0)),
        data_ms=tuple(float(d) for d in data) if data is not None and data.notna().all() else None,
        basis=choice.basis,
    )


def summarise_steps(
    steps: pd.DataFrame, telemetry: pd.DataFrame, warmup_steps: int = 1
) -> StepSummary:
    """Measured fields of a :class:`RunResult` from raw step rows (columns of ``RunStore.read_steps``).

    A step counts as done when every rank that reported anything reported it. The step time, its IQR, the
    samples/s and the batch-drawing share are over :func:`measured_steps` (the steps an A/B trial of the run
    is measured on too); the profiled window's own median is shown beside them, never in their place.
    """
    peak = _peak_mb(telemetry)
    done = done_steps(steps)
    if done.empty:
        return StepSummary(peak_memory_mb=peak)
    losses = done["loss"].dropna() if "loss" in done.columns else pd.Series(dtype="float64")
    final_loss = _opt_float(losses.iloc[-1]) if len(losses) else None
    profiled = done.loc[done["profiled"].fillna(False).astype(bool), "wall_ms"].dropna()
    base = StepSummary(
        steps_done=int(len(done)),
        final_loss=final_loss,
        peak_memory_mb=peak,
        profiled_step_time_ms=_opt_float(profiled.median()) if len(profiled) else None,
    )
    m = measured_steps(steps, warmup_steps)
    if m is None:
        return base
    walls = pd.Series(m.walls_ms)
    share = sum(m.data_ms) / sum(m.walls_ms) if m.data_ms is not None else None
    return replace(
        base,
        step_time_ms=_opt_float(m.step_time_ms),
        data_wait_share=_opt_float(share),
        step_time_iqr_ms=_opt_float(walls.quantile(0.75) - walls.quantile(0.25)),
        step_time_steps=len(m.walls_ms),
        step_time_basis=m.basis,
        samples_per_s=m.samples_per_s,
        typical_step_ms=_opt_float(m.typical_step_ms),
        stalled_share=_opt_float(m.stalled_share),
    )


def _peak_mb(telemetry: pd.DataFrame) -> float | None:
    """Largest memory amount sampled; on a GPU run (NVML lines present) the device's, not the host's RSS."""
    if "source" in telemetry.columns and telemetry["source"].eq("nvml").any():
        telemetry = telemetry[telemetry["source"].eq("nvml")]
    cols = [c for c in MEMORY_METRICS_MB if c in telemetry.columns]
    if telemetry.empty or not cols:
        return None
    return _opt_float(telemetry[cols].apply(pd.to_numeric, errors="coerce").max().max())
