"""What the rules look at: an :class:`Observation` = a trace :class:`Breakdown` and/or the facts of a stored run.

An uploaded trace gives a breakdown and no run; a stored run gives its result, spec and per-step metrics, and
a breakdown when its profiler exported a trace (a run stopped out of memory before that has none, and is
still diagnosed); a ``torch.cuda.memory._dump_snapshot`` pickle gives only memory facts (read without ever
unpickling a class). ``observe(path)`` reads any input through the one table of input kinds
(:mod:`profilers.inputs`) and builds the observation from what its reader returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import pandas as pd

from advisors.loader_facts import LoaderFacts, loader_facts
from profilers.errors import TraceError
from profilers.layers import LAYERS_FILE, Layers, from_agent
from profilers.inputs import RunFolder, is_run_folder, read_input, upload_root
from profilers.efficiency import calibrate as calibration
from profilers.run.captures import CaptureTrigger, capture_trigger
from profilers.run.records import RunResult, StepSummary, summarise_steps
from profilers.run.run_config import RunConfig, run_config
from profilers.telemetry.threads import ThreadUse, read_threads
from profilers.store.files import read_json, read_jsonl, steps_frame, telemetry_frame
from profilers.telemetry.summary import TelemetrySummary, summarise_telemetry
from profilers.trace.breakdown import Breakdown, breakdown
from profilers.trace.events import Trace
from profilers.trace.load import load_trace
from profilers.trace.memory_snapshot import MemorySnapshot
from profilers.trace.sources import find_trace_files
from profilers.run.step_records import step_rows

__all__ = [
    "Observation",
    "RunFacts",
    "is_run_folder",
    "observe",
    "observe_raw",
    "observe_run",
    "run_facts",
    "snapshot_observation",
    "upload_root",
    "with_run_trace",
]

TRACE_SUBFOLDERS = ("tb", "trace")
T = TypeVar("T")


@dataclass(frozen=True)
class RunFacts:
    """A stored run as the advisor needs it. Memory in MiB, times in ms.

    ``losses`` is the mean loss over ranks per finished step, in step order; ``planned_steps`` what the run was
    to do. ``spec`` is how the run was configured (:func:`profilers.run.run_config.run_config`: what the agent saw
    of any launched script, or an older run's ``spec.json``), ``None`` for a folder with neither.
    """

    status: str
    error: str | None
    steps_done: int
    planned_steps: int | None
    step_time_ms: float | None
    samples_per_s: float | None
    peak_memory_mb: float | None
    memory_budget_mb: float | None
    final_loss: float | None
    losses: tuple[float, ...]
    world_size: int
    device: str | None
    spec: RunConfig | None
    telemetry_source: str | None = None
    telemetry: TelemetrySummary | None = None  # steady-step medians of the run's telemetry.jsonl
    peak_memory_unprofiled_mb: float | None = (
        None  # the unprofiled steps' peak: the script's own need
    )
    peak_memory_profiled_mb: float | None = (
        None  # the profiled window's peak: the profiler's events included
    )
    profile_cut: str | None = (
        None  # the memory guard cut the profile: why, in words (the trace holds part of a step)
    )
    stopped_after: int | None = (
        None  # the run was stopped on purpose after this many steps: not observed to its end
    )
    measured_window: tuple[int, int] | None = (
        None  # a script run's timed steps [first, end) from its boot.json
    )
    cpu_matmul_tflops: float | None = (
        None  # the machine's measured matmul peak (profilers.efficiency.calibrate)
    )
    cpu_bf16_fast: bool | None = (
        None  # bf16 matmuls faster than fp32 on this CPU (measured or its flags)
    )
    cpu_bf16_basis: str = ""  # what said so, in words
    # how many steps step_time_ms is measured over (stepwise_agent.steady)
    step_time_steps: int | None = None
    step_time_basis: str | None = (
        None  # how they were chosen ("steady", or a short run's wider basis)
    )
    data_wait_share: float | None = (
        None  # steady steps' time drawing batches, no profiler on (steps.jsonl data_ms)
    )
    threads: ThreadUse | None = (
        None  # a launched script's threads and cores, from its agent (injected.json)
    )
    trigger: CaptureTrigger | None = (
        None  # a watched run's capture: what made it profile itself (capture.json)
    )
    # the script's torch and the CUDA it was built for (agent.json, else launch.json); None if unknown
    torch_version: str | None = None
    cuda_version: str | None = None
    # the median measured step, beside the time per step (step_time_ms)
    typical_step_ms: float | None = None
    # of the measured steps, those that stalled (stepwise_agent.steady)
    stalled_share: float | None = None


@dataclass(frozen=True)
class Observation:
    """One thing to diagnose. ``notes`` carry why a part is missing (e.g. the run stopped before any trace)."""

    source: str
    breakdown: Breakdown | None
    run: RunFacts | None
    notes: tuple[str, ...] = field(default=())
    loader: LoaderFacts | None = (
        None  # DataLoader spans of any host kind (None: not read from a trace)
    )
    snapshot: MemorySnapshot | None = (
        None  # an allocator snapshot (no steps, no timing: memory only)
    )
    device_memory_bytes: int | None = None  # the device's total memory when the user stated it
    # A run whose ranks wrote summaries at capture time: the cross-rank views of all of them (observe_run).
    job: dict[str, Any] | None = None
    layers: Layers | None = (
        None  # per-module rows (the agent's layers.json), when the run wrote them
    )


def run_layers_record(run_dir: Path) -> Layers | None:
    """The agent's per-module record of a run (``None``: it wrote none)."""
    return (
        from_agent(read_json(run_dir / LAYERS_FILE)) if (run_dir / LAYERS_FILE).is_file() else None
    )


def observe(path: str | Path, device_memory_bytes: int | None = None) -> Observation:
    """An observation of a trace (file, folder, zip), a memory snapshot, a stored run folder or an upload, or of
    any kind registered in :mod:`profilers.inputs`. ``device_memory_bytes`` (the device total, when the user
    knows it) gives a snapshot a capacity to compare with. Raises TraceError/RunError."""
    kind, p, raw = read_input(path)
    return observe_raw(raw, str(p), device_memory_bytes, kind.name)


def observe_raw(
    raw: object, source: str, device_memory_bytes: int | None = None, kind: str = "input"
) -> Observation:
    """The observation of what an input reader returned: a Trace, a MemorySnapshot or a RunFolder."""
    if isinstance(raw, Trace):
        return Observation(
            source=source, breakdown=breakdown(raw), run=None, loader=loader_facts(raw)
        )
    if isinstance(raw, MemorySnapshot):
        return snapshot_observation(raw, source, device_memory_bytes)
    if isinstance(raw, RunFolder):
        return observe_run(raw.path)
    raise TraceError(
        f"{source}: the {kind} reader returned a {type(raw).__name__}, which nothing can judge"
    )


def snapshot_observation(
    snapshot: MemorySnapshot, source: str, device_memory_bytes: int | None = None
) -> Observation:
    """A memory snapshot: no steps, so only the memory rules can judge it (the others say why not)."""
    return Observation(
        source=source,
        breakdown=None,
        run=None,
        notes=(
            "a memory snapshot records allocations, not step timing: only memory can be judged",
        ),
        snapshot=snapshot,
        device_memory_bytes=device_memory_bytes,
    )


def observe_run(run_dir: Path) -> Observation:
    """A stored run: its result, spec, steps and telemetry, plus its trace when one was exported, and the
    cross-rank views of the summaries its ranks wrote at capture time if they did (``Observation.job``), taken
    from the trace already loaded here (the slowest rank's critical path reads no file a second time)."""
    from profilers.jobs.agent_summaries import run_job_views

    parts, notes = with_run_trace(
        run_dir, lambda t: (breakdown(t), loader_facts(t), run_job_views(run_dir, t))
    )
    b, loader, job = parts if parts is not None else (None, None, run_job_views(run_dir))
    return Observation(
        source=str(run_dir),
        breakdown=b,
        run=run_facts(run_dir),
        notes=notes,
        loader=loader,
        job=job,
        layers=run_layers_record(run_dir),
    )


def with_run_trace(run_dir: Path, use: Callable[[Trace], T]) -> tuple[T | None, tuple[str, ...]]:
    """``use(trace)`` on the trace a run exported (``tb/`` or ``trace/``), or ``None`` with the reason: the
    profiler exported nothing, or the trace (or what ``use`` reads of it) cannot be read."""
    trace_dir = next((run_dir / d for d in TRACE_SUBFOLDERS if (run_dir / d).is_dir()), None)
    try:
        has_files = trace_dir is not None and bool(find_trace_files(trace_dir))
    except TraceError:
        has_files = False
    if trace_dir is None or not has_files:
        return None, (
            "the run folder has no trace (the profiler exported nothing before the run ended)",
        )
    try:
        return use(load_trace(trace_dir)), ()
    except TraceError as err:
        return None, (f"the run's trace could not be read: {err}",)


def run_facts(run_dir: Path) -> RunFacts:
    """Read ``result.json``, the run's configuration, ``steps.jsonl`` and ``telemetry.jsonl`` (each may be
    missing)."""
    raw_result = read_json(run_dir / "result.json")
    steps = steps_frame(step_rows(run_dir))
    telemetry = telemetry_frame(read_jsonl(run_dir / "telemetry.jsonl"))
    result = RunResult.from_dict(raw_result) if isinstance(raw_result, dict) else None
    spec = run_config(run_dir)
    measured = summarise_steps(steps, telemetry, spec.warmup_steps if spec else 1)
    peak = _first(result.peak_memory_mb if result else None, measured.peak_memory_mb)
    bf16 = calibration.read_bf16(run_dir)
    software = _software(run_dir)
    return RunFacts(
        status=result.status.value if result else "running",
        error=result.error if result else None,
        steps_done=result.steps_done if result and result.steps_done else int(measured.steps_done),
        planned_steps=spec.steps if spec else None,
        # a result.json without typical_step_ms is older than the time per step: its step_time_ms
        # was a median
        step_time_ms=_first(
            result.step_time_ms if result and result.typical_step_ms is not None else None,
            measured.step_time_ms,
            result.step_time_ms if result else None,
        ),
        typical_step_ms=_first(
            result.typical_step_ms if result else None, measured.typical_step_ms
        ),
        stalled_share=_first(result.stalled_share if result else None, measured.stalled_share),
        samples_per_s=_first(result.samples_per_s if result else None, measured.samples_per_s),
        peak_memory_mb=peak,
        memory_budget_mb=float(spec.memory_budget_mb) if spec and spec.memory_budget_mb else None,
        final_loss=_first(result.final_loss if result else None, measured.final_loss),
        losses=loss_curve(steps),
        world_size=result.world_size if result else (spec.world_size if spec else 1),
        device=result.device if result else None,
        spec=spec,
        telemetry_source=result.telemetry_source if result else None,
        telemetry=summarise_telemetry(telemetry, steps),
        peak_memory_unprofiled_mb=result.peak_memory_unprofiled_mb if result else None,
        peak_memory_profiled_mb=result.peak_memory_profiled_mb if result else None,
        profile_cut=result.profile_cut if result else None,
        stopped_after=_stopped_after(result, steps),
        measured_window=_measured_window(read_json(run_dir / "boot.json")),
        cpu_matmul_tflops=calibration.read(run_dir),
        cpu_bf16_fast=bf16[0],
        cpu_bf16_basis=bf16[1],
        **_step_basis(result, measured),
        data_wait_share=measured.data_wait_share,
        threads=read_threads(read_json(run_dir / "injected.json")),
        trigger=capture_trigger(run_dir),
        torch_version=software[0],
        cuda_version=software[1],
    )


def _software(run_dir: Path) -> tuple[str | None, str | None]:
    """The torch that ran the script and the CUDA it was built for: what its agent saw in the process
    (``agent.json``), else what the launcher read of the interpreter (``launch.json``)."""
    found: dict[str, str] = {}
    for name in ("agent.json", "launch.json"):
        raw = read_json(run_dir / name)
        if isinstance(raw, dict):
            for key in ("torch_version", "torch_cuda"):
                if key not in found and isinstance(raw.get(key), str) and raw[key]:
                    found[key] = raw[key]
    return found.get("torch_version"), found.get("torch_cuda")


def _stopped_after(result: RunResult | None, steps: pd.DataFrame) -> int | None:
    """The steps a run did when it was stopped before its own end (a launched script profiled then stopped, a
    trial stopped at its step limit or from outside), else ``None``: a run observed to its end."""
    done = (
        result.steps_done
        if result is not None and result.steps_done
        else (int(steps["step"].nunique()) if not steps.empty and "step" in steps else 0)
    )
    if result is None or result.status.value != "ok" or result.profiled_then_stopped is not None:
        return done
    return None


def loss_curve(steps: pd.DataFrame) -> tuple[float, ...]:
    """Mean loss over ranks per step, in step order, finite values only."""
    if steps.empty:
        return ()
    per_step = steps.groupby("step")["loss"].mean().sort_index()
    return tuple(float(v) for v in per_step if isinstance(v, float) and math.isfinite(v))


def _measured_window(boot: Any) -> tuple[int, int] | None:
    """The steps a script run timed without profiler (``warmup`` .. ``warmup + measure``), when it asked for any."""
    if not isinstance(boot, dict):
        return None
    try:
        warmup, measure = int(boot.get("warmup", 0)), int(boot.get("measure", 0))
    except (TypeError, ValueError):
        return None
    return (warmup, warmup + measure) if measure > 0 and warmup >= 0 else None


def _first(*values: float | None) -> float | None:
    return next((float(v) for v in values if v is not None), None)


def _step_basis(result: RunResult | None, measured: StepSummary) -> dict[str, Any]:
    """The count and basis of the step time shown: the result's when it stated the step time, else the steps'."""
    if result is not None and result.step_time_ms is not None:
        return {
            "step_time_steps": result.step_time_steps,
            "step_time_basis": result.step_time_basis,
        }
    return {
        "step_time_steps": measured.step_time_steps,
        "step_time_basis": measured.step_time_basis,
    }
