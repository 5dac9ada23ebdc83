"""One trial = one run of a spec, reduced to what an A/B comparison needs (:class:`RunOutcome`).

The experiment takes any :data:`RunFn`, so unit tests pass a fake with made-up timings; :func:`script_runner`
is the real one: it launches the spec (a user's script or a sample workload's, one path for both) into a
:class:`RunStore` and reads the run's ``steps.jsonl``. Measured steps are the timed window after the warm-up, the
steady steps of :mod:`stepwise_agent.steady` (never the profiled ones); a trial with fewer than
:data:`MIN_MEASURED_STEPS` of them widens its basis as that module says. A step's time is its slowest rank's; its
samples are summed over ranks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, TypeVar

import pandas as pd

from advisors.observation import loss_curve
from advisors.experiments.trial_load import TrialLoad, trial_load
from advisors.stats import Trial
from profilers.run.handle import follow
from profilers.run.records import RunResult
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore
from profilers.run.records import measured_steps
from stepwise_agent.steady import BASIS_ALL

MIN_MEASURED_STEPS = 3
RunProgressFn = Callable[
    [dict[str, Any]], None
]  # a trial run's own progress.json, as handle.follow reports it
#: What an experiment runs: a script — a user's, or a sample workload's (``python -m sample_runs.train``).
Spec = ScriptSpec
#: The spec all through a function (an experiment patches and runs scripts; tests may run their own kind).
SpecT = TypeVar("SpecT", bound=ScriptSpec)
_RunSpec = TypeVar("_RunSpec", bound=Spec, contravariant=True)


@dataclass(frozen=True)
class RunOutcome:
    """A finished run as the experiment sees it. ``trial`` is ``None`` when no step could be measured."""

    status: str
    trial: Trial | None
    peak_memory_mb: float | None
    losses: tuple[float, ...]  # mean over ranks, per step index
    steps_done: int
    error: str | None = None
    run_dir: str | None = None
    host_load: float | None = (
        None  # 1-minute load average of the machine when the run ended (noise context)
    )
    applied: Mapping[str, Any] | None = (
        None  # a script run's injected.json: each knob acted or not, call sites
    )
    notes: tuple[
        str, ...
    ] = ()  # what the verdict must say of this run (e.g. it ended before its steps)
    load: TrialLoad | None = None  # other programs' use of the machine while its steps were timed
    per_step: bool = (
        False  # no batch was seen (no DataLoader): its throughput is steps/s, not samples/s
    )

    @property
    def contended(self) -> bool:
        return self.load is not None and self.load.contended

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.trial is not None


def spec_changes(before: Spec, after: Spec) -> dict[str, tuple[Any, Any]]:
    """``{knob or field: (before, after)}`` between two specs (:meth:`ScriptSpec.describe_diff`)."""
    return before.describe_diff(after)


class RunFn(Protocol[_RunSpec]):
    """Runs one spec (``RunFn[ScriptSpec]``) to a :class:`RunOutcome`."""

    def __call__(self, spec: _RunSpec, on_progress: RunProgressFn | None = None) -> RunOutcome: ...


def script_runner(
    store: RunStore, timeout_s: float | None = None, experiment: str | None = None
) -> RunFn[ScriptSpec]:
    """The :data:`RunFn` of a :class:`~profilers.run.script_spec.ScriptSpec`: the script launched with its seeds and
    injected knobs; measured steps are exactly the timed window after warm-up (never the profiled ones). A
    script that ends before its window is measured on the steps it did, and the outcome says so."""
    from profilers.run.launch import start_script

    def run_one(spec: ScriptSpec, on_progress: RunProgressFn | None = None) -> RunOutcome:
        handle = start_script(spec, store, label=f"ab-{spec.name}", parent=experiment)
        result = follow(handle, on_progress, timeout_s)
        steps = store.read_steps(handle.run_id)
        load = trial_load(
            store.read_telemetry(handle.run_id),
            steps,
            spec.warmup_steps,
            spec.warmup_steps + spec.measure_steps - 1,
        )
        return replace(
            script_outcome(spec, result, steps, handle.run_dir),
            host_load=_load_average(),
            load=load,
        )

    return run_one


def script_outcome(
    spec: ScriptSpec, result: RunResult, steps: pd.DataFrame, run_dir: Path
) -> RunOutcome:
    """A script run reduced for the experiment: steps ``warmup .. warmup + measure`` timed, its injection report."""
    from profilers.store.files import read_json

    window = (
        steps[
            (steps["step"] >= spec.warmup_steps)
            & (steps["step"] < spec.warmup_steps + spec.measure_steps)
        ]
        if not steps.empty
        else steps
    )
    done = int(window["step"].nunique()) if not window.empty else 0
    notes: tuple[str, ...] = ()
    unseen = bool(done) and window["samples"].fillna(0).le(0).all()
    if (
        unseen
    ):  # no DataLoader batch was seen: compare per step (the fixes tried never change the batch)
        steps = steps.assign(samples=1.0)
    # the run's own measured steps (its result.json's step time and samples/s are read from the same ones)
    trial = measured_trial(steps, spec.warmup_steps) if done else None
    if 0 < done < spec.measure_steps:
        notes = (
            f"the script ended after {result.steps_done} steps: measured on {done} of the "
            f"{spec.measure_steps} steps asked for",
        )
    elif done == 0 and result.status.value == "ok":
        notes = (
            f"the script ended after {result.steps_done} steps, before any measured step (after "
            f"{spec.warmup_steps} warm-up steps)",
        )
    if unseen:
        notes += (
            "the script's batches were not seen (no DataLoader): throughput is compared per step",
        )
    if result.profile_cut:  # the step times above were measured without the profiler: they stand
        notes += (
            "not profiled whole: the profiler's events outgrew their memory budget, so the trace holds part "
            "of a step",
        )
    applied = read_json(run_dir / "injected.json")
    return RunOutcome(
        status=result.status.value,
        trial=trial,
        peak_memory_mb=result.peak_memory_mb,
        losses=loss_curve(steps),
        steps_done=result.steps_done,
        error=result.error,
        run_dir=str(run_dir),
        applied=applied if isinstance(applied, dict) else None,
        notes=notes,
        per_step=bool(unseen),
    )


def measured_trial(steps: pd.DataFrame, warmup_steps: int) -> Trial | None:
    """A trial from a run's raw step rows: its measured steps (:func:`profilers.run.records.measured_steps`, the
    steps the run's own step time and samples/s are read from, so a trial's samples/s is its run's), or
    ``None`` when no step past the warm-up was measured."""
    m = measured_steps(steps, warmup_steps)
    if m is None or m.basis == BASIS_ALL or not sum(m.samples):
        return None  # nothing past the warm-up: a comparison needs no warm-up step
    return Trial(
        walls_ms=m.walls_ms, samples_per_step=sum(m.samples) / len(m.samples), data_ms=m.data_ms
    )


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
