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
from advisors.analysis import Analysis


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


def measured_before(store: RunStore, source_run: str) -> dict[str, str]:
    """Fix id → what an earlier Apply on ``source_run`` measured, for each fix it rejected with a measurement
    ("rejected: …", never an inconclusive, failed or not-applied one): the ladder on the same run need not spend
    trials on it again. The newest Apply of a fix speaks for it."""
    import time

    from advisors.experiments.results.stored_view import read_view
    from profilers.store import experiments as stored

    out: dict[str, str] = {}
    for rec in stored.of_run(store, source_run, "apply"):  # newest first
        seen = read_view(stored.view(store, rec.run_id))
        x = seen.record if seen is not None else None
        if x is None or not x.fix_id or x.fix_id in out:
            continue
        if x.outcome == "rejected":
            when = time.strftime("%H:%M", time.localtime(rec.created_unix)) if rec.created_unix else "earlier"
            out[x.fix_id] = (f"the Apply at {when} ({rec.run_id}) measured it on this run: {x.outcome_text}; "
                             "Apply it again to re-measure")
        else:
            out[x.fix_id] = ""  # the newest Apply did not reject it: an older rejection no longer speaks
    return {k: v for k, v in out.items() if v}


def start_ladder(store: RunStore, source: RunRecord, a: Analysis, rounds: int, trials: int) -> BackgroundJob[Any]:
    """Diagnose → apply → measure, ``rounds`` times, as a stored experiment of ``source``; the job's result is a
    ``Ladder``. Fixes an Apply on ``source`` already measured and rejected are not re-tried (:func:`measured_before`)."""
    from advisors.experiments.experiment import Policy
    from advisors.experiments.optimize import optimize
    from advisors.experiments.trials import store_runner

    assert a.run is not None and a.run.spec is not None
    spec, device = a.run.spec, device_of(a)
    earlier = measured_before(store, source.run_id)
    return stored_jobs.start(store, source, "ladder", {"rounds": rounds, "trials": trials}, a,
                             lambda exp_id, report: optimize(spec, stored_jobs.stoppable(
                                                             store, exp_id, store_runner(store, experiment=exp_id)),
                                                             rounds=rounds, policy=Policy(trials=trials),
                                                             device=device, on_progress=report,
                                                             measured_before=earlier))
