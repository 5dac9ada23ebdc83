"""Glue of the Advisor's Apply (no Streamlit): which fixes can be tried, and starting the experiment or the
ladder in the background. The runs are real runs in the store (``advisors.experiments.trials.store_runner``)."""

from __future__ import annotations

from typing import Any

from advisors.experiments.experiment import Experiment, Policy, run_experiment
from advisors.experiments.optimize import Ladder, candidates, optimize
from advisors.experiments.trials import Spec, store_runner
from advisors.verdict import Fix
from app.services import stored_jobs
from app.services.jobs import BackgroundJob
from profilers.run.records import RunRecord
from profilers.store.runs import RunStore
from reports.analysis import Analysis


def device_of(a: Analysis) -> str:
    """Where the run executed: ``cuda`` or ``cpu`` (what decides whether a CUDA-only fix can act)."""
    dev = (a.run.device if a.run else None) or (a.breakdown.device if a.breakdown else "cpu")
    return "cuda" if dev in ("cuda", "gpu") or str(dev).startswith("cuda") else "cpu"


def candidate_fixes(a: Analysis) -> list[Fix]:
    """Fixes worth an experiment for this run, the binding finding's first (``advisors.experiments.optimize.candidates``)."""
    if a.diagnosis is None or a.run is None or a.run.spec is None:
        return []
    return list(candidates(a.diagnosis, a.run.spec, device_of(a), set()))


def start_experiment(store: RunStore, source: RunRecord, a: Analysis, fix: Any, trials: int) -> BackgroundJob[Any]:
    """Baseline vs patched, interleaved, ``trials`` runs each, as a stored experiment of ``source``; the job's
    result is an ``Experiment``."""
    from advisors.experiments.experiment import Policy, run_experiment
    from advisors.experiments.trials import store_runner

    assert a.run is not None and a.run.spec is not None
    spec = a.run.spec
    return stored_jobs.start(store, source, "apply", {"fix": fix.id, "fix_title": fix.title, "trials": trials}, a,
                             lambda exp_id, report: run_experiment(
                                 spec, fix, stored_jobs.stoppable(store, exp_id, store_runner(store, experiment=exp_id)),
                                 Policy(trials=trials), on_progress=report))


def start_ladder(store: RunStore, source: RunRecord, a: Analysis, rounds: int, trials: int) -> BackgroundJob[Any]:
    """Diagnose → apply → measure, ``rounds`` times, as a stored experiment of ``source``; the job's result is a
    ``Ladder``."""
    from advisors.experiments.experiment import Policy
    from advisors.experiments.optimize import optimize
    from advisors.experiments.trials import store_runner

    assert a.run is not None and a.run.spec is not None
    spec, device = a.run.spec, device_of(a)
    return stored_jobs.start(store, source, "ladder", {"rounds": rounds, "trials": trials}, a,
                             lambda exp_id, report: optimize(spec, stored_jobs.stoppable(
                                                             store, exp_id, store_runner(store, experiment=exp_id)),
                                                             rounds=rounds, policy=Policy(trials=trials),
                                                             device=device, on_progress=report))
