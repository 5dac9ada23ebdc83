"""Glue of the Advisor's Apply on a sample workload's run stored before the workloads became a script (kind
``run``, a ``spec.json``; no Streamlit here). Its settings become the workload's command line again
(:mod:`cli.workloads`) and Apply and the ladder run it as a script, exactly as on a run launched today
(:mod:`app.services.script_apply`): the same trials, the same fixes, the same stored experiment.

Such a run's folder holds no record of the script's flags (the agent did not run it), so until a first trial has
run the fixes offered are those injected at boot; the ladder learns the flags from its first run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisors.verdict import Fix
from app.services import script_apply
from profilers.errors import RunError
from profilers.run.records import RunRecord
from profilers.store.runs import RunStore
from advisors.analysis import Analysis


def device_of(a: Analysis) -> str:
    """Where the run executed: ``cuda`` or ``cpu`` (what decides whether a CUDA-only fix can act)."""
    dev = (a.run.device if a.run else None) or (a.breakdown.device if a.breakdown else "cpu")
    return "cuda" if dev in ("cuda", "gpu") or str(dev).startswith("cuda") else "cpu"


def candidate_fixes(a: Analysis) -> list[Fix]:
    """Fixes worth an experiment for this run, the binding finding's first: those that can act on its device and
    ranks and that the launcher injects at boot (the script's own flags are learnt from its first trial)."""
    from advisors.experiments.optimize import proposed
    from advisors.fixes import applies, spec_of
    from advisors.fixes.context import ScriptContext
    from advisors.fixes.data.workers import cores_of

    if a.diagnosis is None or a.run is None or a.run.spec is None:
        return []
    workers = getattr(a.run.spec, "num_workers", None)
    tel = a.run.telemetry
    ctx = ScriptContext(  # the run's cores and how busy it kept them: the worker count its advice quotes
        device=device_of(a),
        world_size=a.run.world_size,
        cores=cores_of(tel, a.run.threads) or ScriptContext().cores,
        host_busy=tel.run_cpu_busy if tel is not None else None,
        loader={"num_workers": workers} if workers is not None else {},
        layers=a.layers.rows,
    )
    out = []
    for fix_id in proposed(a.diagnosis):
        spec = spec_of(fix_id)
        injection = spec.injection
        if (
            injection is None
            or applies(spec.fix, ctx.device, ctx.world_size)
            or not injection.knobs(ctx)
        ):
            continue
        if (
            spec.conv_only
            and a.breakdown is not None
            and not getattr(a.breakdown, "has_conv", True)
        ):
            continue
        out.append(spec.fix)
    return out


def target(store: RunStore, source: RunRecord, a: Analysis) -> script_apply.ScriptTarget:
    """The stored workload run as a script to apply fixes to: its ``spec.json`` as the workload's command line."""
    from advisors.experiments.script_strategy import context_of
    from advisors.fixes.context import ScriptContext
    from cli.workloads import settings_of, workload_spec

    data = store.read_spec(source.run_id)
    if data is None:
        raise RunError("this run has no spec.json with the workload's settings")
    workload, size, values, params = settings_of(data)
    spec = workload_spec(store.root, workload, size, values, params)
    run_dir = Path(source.run_dir)
    ctx = context_of(run_dir, ScriptContext(device=device_of(a), world_size=spec.world_size))
    return script_apply.ScriptTarget(spec, run_dir, ctx.device, ctx)


def start_experiment(
    store: RunStore,
    source: RunRecord,
    a: Analysis,
    fix: Any,
    trials: int,
    max_trials: int | None = None,
) -> Any:
    """Baseline vs patched, interleaved, ``trials`` runs each (up to ``max_trials`` pairs when they
    disagree), as a stored experiment of ``source``."""
    return script_apply.start_experiment(
        store, source, a, target(store, source, a), fix, trials, max_trials
    )


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
            when = (
                time.strftime("%H:%M", time.localtime(rec.created_unix))
                if rec.created_unix
                else "earlier"
            )
            out[x.fix_id] = (
                f"the Apply at {when} ({rec.run_id}) measured it on this run: {x.outcome_text}; "
                "Apply it again to re-measure"
            )
        else:
            out[x.fix_id] = (
                ""  # the newest Apply did not reject it: an older rejection no longer speaks
            )
    return {k: v for k, v in out.items() if v}


def start_ladder(
    store: RunStore,
    source: RunRecord,
    a: Analysis,
    rounds: int,
    trials: int,
    max_trials: int | None = None,
) -> Any:
    """Diagnose → apply → measure, ``rounds`` times, as a stored experiment of ``source``. Fixes an Apply on
    ``source`` already measured and rejected are not re-tried (:func:`measured_before`)."""
    return script_apply.start_ladder(
        store,
        source,
        a,
        target(store, source, a),
        rounds,
        trials,
        max_trials,
        measured_before=measured_before(store, source.run_id),
    )
