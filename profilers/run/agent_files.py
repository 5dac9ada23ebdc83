"""The analyst's side of a launched script: watch it from outside, then turn the agent's plain files into a result.

The agent (:mod:`stepwise_agent.boot`) runs in the user's interpreter and writes only plain files. Everything
that needs our own libraries happens here, in Stepwise's environment:

- :class:`LaunchMonitor` samples telemetry (psutil, NVML when present) over the launched process tree *by pid*,
  until the process is gone, so a run the kernel killed keeps the peak it actually reached; and it feeds the
  **memory guard** (:mod:`profilers.run.memory_guard`: the limit's rule, the profile's own budget, the cut).
- :func:`finish_launch` writes ``result.json`` from ``agent_result.json``, ``steps.jsonl``, ``telemetry.jsonl``
  and every ``rank{R}.error.json`` (the first exception raised wins: a rank that raised is ``failed``, never
  ``killed``), names an out-of-memory end with its peak and what to do — or, when the profile was what grew,
  says so ("the profiler's events outgrew …") and never blames the script — records the peaks of the
  unprofiled steps and of the profiled window apart, each rank's own step time (``rank_step_time_ms``, the
  ``slowest_rank``: under torchrun, this node's ranks) and the node (``node_rank``), and writes TensorBoard scalars.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import time
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from profilers.run.memory_guard import MEMORY_LIMIT_ENV, OOM_ADVICE, GuardTrip, MemoryGuard
from profilers.run.script_errors import describe_rank_error
from profilers.run.records import RunResult, RunStatus, summarise_steps
from profilers.store.files import (
    read_json,
    read_jsonl,
    steps_frame,
    telemetry_frame,
    write_json_atomic,
)
from stepwise_agent.steady import choose_steps, time_per_step
from profilers.run.step_records import rolled_steps, step_rows

OOM_NEAR_SHARE = 0.80  # a SIGKILL with the tree's peak at or above this share of the limit reads as the kernel's OOM
TELEMETRY_INTERVAL_S = 0.1
# a watched run is long: 5 samples a second keep 10 in the trigger's judged 2 s (a rule over them needs 5), at half the
# cost (a sample of the process tree took ~1 ms of the runner's CPU: 1% of a core at 10 a second)
WATCH_TELEMETRY_INTERVAL_S = 0.2


class LaunchMonitor:
    """Telemetry and the memory guard (:class:`~profilers.run.memory_guard.MemoryGuard`) of one launched
    process tree (see the module docs)."""

    def __init__(
        self,
        run_dir: Path,
        env: Mapping[str, str] | None = None,
        interval_s: float = TELEMETRY_INTERVAL_S,
    ) -> None:
        self.run_dir, self.interval_s = run_dir, interval_s
        self.guard = MemoryGuard(run_dir, env)
        self.limit_mb, self.limit_source = self.guard.limit_mb, self.guard.limit_source
        self.sampler: Any = None

    @property
    def trip(self) -> GuardTrip | None:
        return self.guard.trip

    @property
    def peak_rss_mb(self) -> float:
        return self.guard.peak_rss_mb

    @peak_rss_mb.setter
    def peak_rss_mb(self, value: float) -> None:
        self.guard.peak_rss_mb = value

    def start(self, pid: int) -> None:
        from profilers.telemetry.sampler import TelemetrySampler

        try:
            self.sampler = TelemetrySampler(
                self.run_dir / "telemetry.jsonl", self.interval_s, root_pids=[pid]
            )
            self.sampler.start()
        except Exception:  # telemetry is a bonus: never the reason a launch fails
            self.sampler = None

    def tick(self, progress: Mapping[str, Any] | None) -> bool:
        """Check the guard on the newest sample; True when the tree must be killed now (grace is over)."""
        return self.guard.observe(self._host_rss(), progress)

    def stop(self) -> None:
        """After the process is gone: one last sample, then the sampler stops."""
        if self.sampler is None:
            return
        with (
            contextlib.suppress(Exception),
            open(self.run_dir / "telemetry.jsonl", "a", encoding="utf-8") as fh,
        ):
            self.sampler.sample_once(fh)
        rss = self._host_rss()
        if rss is not None:
            self.guard.peak_rss_mb = max(self.guard.peak_rss_mb, rss)
        self.sampler.stop()

    def _host_rss(self) -> float | None:
        rows = getattr(self.sampler, "last_rows", None) or []
        values = [m.get("rss_mb") for source, m in rows if source == "host"]
        return float(values[0]) if values and values[0] is not None else None


def rank_errors(run_dir: Path) -> list[dict[str, Any]]:
    """Every ``rank{R}.error.json``, first raised first."""
    found = [read_json(p) for p in run_dir.glob("rank*.error.json")]
    return sorted(
        (e for e in found if isinstance(e, dict)), key=lambda e: float(e.get("t_unix") or 0.0)
    )


def _first_exception(errors: list[dict[str, Any]], world_size: int, interpreter: str | None) -> str:
    """A rank above 0 proves several processes even when no record of the world's size survived the failure."""
    ranks = [int(e["rank"]) for e in errors if isinstance(e.get("rank"), int)]
    return describe_rank_error(
        errors[0], len(errors) - 1, max([world_size, *(r + 1 for r in ranks)]), interpreter
    )


def boot_warmup(run_dir: Path) -> int:
    """The warm-up steps the launcher asked the agent for (``boot.json``; a plain launch: 1), so the run's
    result is measured on the very steps an A/B trial of it is (:func:`profilers.run.records.measured_steps`)."""
    boot = read_json(run_dir / "boot.json")
    try:
        return max(int(boot.get("warmup", 1)), 1) if isinstance(boot, dict) else 1
    except (TypeError, ValueError):
        return 1


def finish_launch(
    run_dir: Path,
    exit_code: int | None,
    monitor: LaunchMonitor | None = None,
    manifest: Mapping[str, Any] | None = None,
) -> RunResult | None:
    """Write ``result.json`` for a launched script from the agent's files; None when nothing tells what happened
    (no agent result, no rank error, no memory verdict): the runner then classifies the exit itself."""
    agent = read_json(run_dir / "agent_result.json")
    errors = rank_errors(run_dir)
    trip = monitor.trip if monitor is not None else None
    telemetry = telemetry_frame(read_jsonl(run_dir / "telemetry.jsonl"))
    steps = steps_frame(step_rows(run_dir))
    summary = summarise_steps(steps, telemetry, boot_warmup(run_dir))
    if rolled := rolled_steps(
        run_dir
    ):  # a long watched run: its steps past the first are rolled up
        summary = dataclasses.replace(summary, steps_done=summary.steps_done + rolled)
    warnings: list[str] = []
    if isinstance(agent, dict):
        status = RunStatus.parse(agent.get("status"))
        error = agent.get("error")
        warnings = [str(w) for w in agent.get("warnings") or ()]
        peak = agent.get("cuda_peak_mb") or summary.peak_memory_mb or agent.get("host_peak_rss_mb")
        base: dict[str, Any] = dict(
            device=agent.get("device"),
            device_name=agent.get("device_name"),
            world_size=int(agent.get("world_size") or 1),
            started_unix=agent.get("started_unix"),
            finished_unix=agent.get("finished_unix"),
            profiled_then_stopped=agent.get("profiled_then_stopped"),
        )
    else:
        status, error, peak = RunStatus.RUNNING, None, summary.peak_memory_mb
        base = dict(
            world_size=int((manifest or {}).get("world_size") or 1),
            started_unix=(manifest or {}).get("created_unix"),
            finished_unix=time.time(),
        )
    if errors and status in (RunStatus.OK, RunStatus.RUNNING, RunStatus.FAILED):
        oom = any(e.get("out_of_memory") for e in errors[:1])
        status = RunStatus.OUT_OF_MEMORY if oom else RunStatus.FAILED
        launch = read_json(run_dir / "launch.json")
        error = _first_exception(
            errors,
            max(int(base.get("world_size") or 1), len(errors)),
            launch.get("interpreter") if isinstance(launch, dict) else None,
        )
    cut = monitor.guard.cut if monitor is not None else None
    if cut is not None and trip is not None and trip.after_cut:
        cut = None  # the script grew on by itself after the cut: the profiler is not what outgrew the limit
    if cut is not None:
        warnings.insert(0, cut.message())
        if status is RunStatus.RUNNING and trip is None:  # killed while exporting what it had
            status, error = (
                RunStatus.KILLED,
                (
                    f"{cut.message()}; exporting the profile did not finish in time, so "
                    "the run was stopped"
                ),
            )
    if trip is not None:
        status, error = RunStatus.OUT_OF_MEMORY, trip.message() + (f"\n{error}" if error else "")
        warnings.append(
            f"the memory guard ended the run (limit {trip.limit_mb:.0f} MiB, "
            f"{monitor.limit_source if monitor else MEMORY_LIMIT_ENV})"
        )
    elif (
        status is RunStatus.RUNNING
        and monitor is not None
        and killed_for_memory(exit_code, monitor)
    ):
        status = RunStatus.OUT_OF_MEMORY
        error = (
            f"out of memory: the process was killed by SIGKILL with its host memory at {monitor.peak_rss_mb:.0f} "
            f"MiB, near the limit of {monitor.limit_mb:.0f} MiB (the kernel's OOM killer); {OOM_ADVICE}"
        )
    elif status is RunStatus.OUT_OF_MEMORY and error and OOM_ADVICE not in error:
        error = f"out of memory: {error.splitlines()[0]}; {OOM_ADVICE}\n{error}"
    if status is RunStatus.RUNNING:
        return None
    if (
        monitor is not None
        and monitor.peak_rss_mb
        and (peak is None or base.get("device") != "cuda")
    ):
        peak = max(float(peak or 0.0), monitor.peak_rss_mb)
    if not isinstance(agent, dict):
        warnings.append(
            "the script ended without the agent's result: figures come from the steps and telemetry "
            "written so far"
        )
    sources = telemetry["source"].dropna().unique().tolist() if "source" in telemetry else []
    fields: dict[str, Any] = summary.result_fields()
    fields["peak_memory_mb"] = peak
    fields.update(_window_peaks(agent if isinstance(agent, dict) else {}, monitor))
    fields["profile_cut"] = cut.message() if cut is not None else None
    result = RunResult(
        status=status,
        error=error,
        exit_code=exit_code,
        warnings=tuple(warnings),
        telemetry_source=sources[0] if sources else None,
        telemetry_note=getattr(getattr(monitor, "sampler", None), "note", None),
        **base,
        **fields,
    )
    ranks = rank_step_times(steps, boot_warmup(run_dir), int(base.get("world_size") or 1))
    extra = {
        "rank_step_time_ms": ranks,
        "node_rank": agent.get("node_rank", 0) if isinstance(agent, dict) else 0,
        "slowest_rank": max(range(len(ranks)), key=lambda r: ranks[r] or 0.0)
        if any(ranks)
        else None,
    }
    write_json_atomic(run_dir / "result.json", {**result.to_dict(), **extra})
    _write_scalars(run_dir)
    return result


def rank_step_times(steps: pd.DataFrame, warmup: int, world_size: int = 1) -> list[float | None]:
    """Each rank's time per step over its own steady steps (:func:`stepwise_agent.steady.choose_steps`,
    :func:`~stepwise_agent.steady.time_per_step`), in rank order: who
    is slow, beside the run's step time (the slowest rank's per step). A rank whose steps are not in this folder
    (another node's, in a run of several nodes) is ``None``."""
    if steps.empty:
        return []
    out: list[float | None] = []
    for rank in range(max(int(steps["rank"].max()) + 1, world_size)):
        rows = steps[steps["rank"] == rank].sort_values("step")
        choice = choose_steps(
            [int(s) for s in rows["step"]],
            rows["profiled"].fillna(False).astype(bool).tolist(),
            warmup,
        )
        walls = [float(w) for w in rows["wall_ms"].iloc[list(choice.positions)].dropna()]
        per_step = time_per_step(walls)
        out.append(round(per_step, 4) if per_step is not None else None)
    return out


def _window_peaks(
    agent: Mapping[str, Any], monitor: LaunchMonitor | None
) -> dict[str, float | None]:
    """Peaks of the unprofiled steps and of the profiled window, apart: the process tree's (the monitor's
    samples, by the agent's phase) where it was watched, else the agent's own process's (``ru_maxrss``)."""
    guard = monitor.guard if monitor is not None else None
    unprofiled = guard.peak_unprofiled_mb if guard is not None else None
    profiled = guard.peak_profiled_mb if guard is not None else None
    return {
        "peak_memory_unprofiled_mb": unprofiled
        if unprofiled is not None
        else agent.get("peak_rss_unprofiled_mb"),
        "peak_memory_profiled_mb": profiled
        if profiled is not None
        else agent.get("peak_rss_profiled_mb"),
    }


def killed_for_memory(exit_code: int | None, monitor: LaunchMonitor) -> bool:
    """A SIGKILL (directly, or a rank's, as torchrun reports it) while the tree's peak was near the limit."""
    killed = exit_code in (-signal.SIGKILL, 128 + signal.SIGKILL) or (
        exit_code not in (None, 0) and "Signal 9 (SIGKILL)" in _stderr(monitor.run_dir)
    )
    return killed and monitor.peak_rss_mb >= OOM_NEAR_SHARE * monitor.limit_mb


def _stderr(run_dir: Path) -> str:
    with contextlib.suppress(OSError):
        return (run_dir / "stderr.log").read_text(errors="replace")[-16_384:]
    return ""


def _write_scalars(run_dir: Path) -> None:
    try:
        from profilers.run.tb_export import write_scalars

        write_scalars(run_dir)
    except (
        ModuleNotFoundError
    ):  # a base install without TensorBoard: nothing to say (was a line under every failure)
        return
    except Exception as err:  # scalars are a convenience; the run is already stored
        with (
            contextlib.suppress(OSError),
            open(run_dir / "stderr.log", "a", encoding="utf-8") as fh,
        ):
            fh.write(f"stepwise: TensorBoard scalars not written: {json.dumps(str(err))}\n")
