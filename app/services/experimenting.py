"""Glue of the Advisor's Apply (no Streamlit): which fixes can be tried, and starting the experiment or the
ladder in the background. The runs are real runs in the store (``advisors.experiments.trials.store_runner``).

The experiment machinery is imported inside the functions that start one, so that opening a page does not
load it."""

from __future__ import annotations

from typing import Any

from app.services.jobs import BackgroundJob
from profilers.store.runs import RunStore
from reports.analysis import Analysis

def device_of(a: Analysis) -> str:
    """Where the run executed: ``cuda`` or ``cpu`` (what decides whether a CUDA-only fix can act)."""
    dev = (a.run.device if a.run else None) or (a.breakdown.device if a.breakdown else "cpu")
    return "cuda" if dev in ("cuda", "gpu") or str(dev).startswith("cuda") else "cpu"


def candidate_fixes(a: Analysis) -> list[Any]:
    """Fixes worth an experiment for this run, the binding finding's first (``advisors.experiments.optimize.candidates``)."""
    from advisors.experiments.optimize import candidates

    if a.diagnosis is None or a.run is None or a.run.spec is None:
        return []
    return list(candidates(a.diagnosis, a.run.spec, device_of(a), set()))


def start_experiment(store: RunStore, a: Analysis, fix: Any, trials: int) -> BackgroundJob:
    """Baseline vs patched, interleaved, ``trials`` runs each; the job's result is an ``Experiment``."""
    from advisors.experiments.experiment import Policy, run_experiment
    from advisors.experiments.trials import store_runner

    assert a.run is not None and a.run.spec is not None
    spec, run = a.run.spec, store_runner(store)
    return BackgroundJob(f"experiment-{fix.id}",
                         lambda report: run_experiment(spec, fix, run, Policy(trials=trials), on_progress=report))


def start_ladder(store: RunStore, a: Analysis, rounds: int, trials: int) -> BackgroundJob:
    """Diagnose → apply → measure, ``rounds`` times; the job's result is a ``Ladder``."""
    from advisors.experiments.experiment import Policy
    from advisors.experiments.optimize import optimize
    from advisors.experiments.trials import store_runner

    assert a.run is not None and a.run.spec is not None
    spec, run, device = a.run.spec, store_runner(store), device_of(a)
    return BackgroundJob("ladder", lambda report: optimize(spec, run, rounds=rounds, policy=Policy(trials=trials),
                                                           device=device, on_progress=report))


def describe_progress(event: dict[str, Any]) -> str:
    """One line for a progress event of the experiment or the ladder."""
    if not event:
        return "starting…"
    parts = []
    if "round" in event:
        parts.append(f"round {event['round']}")
    if event.get("fix"):
        parts.append(f"fix {event['fix']}")
    phase = event.get("phase")
    if phase == "trial":
        parts.append(f"{event.get('arm')} run {event.get('trial')} of {event.get('trials')}")
    elif phase in ("diagnose", "diagnosis_run"):
        parts.append("diagnosing a fresh run")
    run = event.get("run") or {}
    if run.get("step") is not None:
        parts.append(f"step {run.get('step')} of {run.get('total_steps', '?')}")
    return " · ".join(parts) or str(phase)


def trial_fraction(event: dict[str, Any]) -> float:
    """Rough completion of an experiment: finished runs of the 2 × trials it plans, plus the current run's steps."""
    trials = int(event.get("trials") or 0)
    if event.get("phase") != "trial" or not trials:
        return 0.0
    run = event.get("run") or {}
    within = (run.get("step") or 0) / max(run.get("total_steps") or 1, 1)
    pair = int(event.get("trial") or 1) - 1
    second = "baseline" if pair % 2 else "patched"  # pairs alternate A B, B A (advisors.experiments.experiment)
    index = 2 * pair + (1 if event.get("arm") == second else 0)
    return min((index + within) / (2 * trials), 1.0)
