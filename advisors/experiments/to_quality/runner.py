"""The real :data:`~advisors.experiments.to_quality.runs.CurveRunFn`: an arm's seed launched into the run store and
stopped at its target, its budget, or the agent's refusal of the change it was asked to inject."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisors.experiments.to_quality.runs import CurveRunFn, QualityRun, QualitySpec, curve_of, seen
from advisors.experiments.trial_load import trial_load
from advisors.quality.curve import time_to_target
from advisors.quality.target import Budget, Target
from profilers.store.files import read_json
from profilers.store.runs import RunStore
from stepwise_agent.noise_scale import ENV as NOISE_ENV
from stepwise_agent.seeding import ENV as SEED_ENV, FILE as SEED_FILE


def store_curve_runner(
    store: RunStore,
    budget: Budget,
    metric: str | None = None,
    experiment: str | None = None,
    poll_s: float = 0.5,
) -> CurveRunFn:
    """The real :data:`CurveRunFn`: runs the arm's spec in ``store`` and stops it once its curve reaches the
    target (when one is known) or its clock passes a budget in seconds — or, for a script, as soon as the agent
    refused a convergence change it was asked to inject (the run cannot judge it: "not applied")."""
    from profilers.run.handle import follow

    def run_one(spec: QualitySpec, stop_at: Target | None) -> QualityRun:
        from profilers.run.launch import start_script

        # every arm carries the noise-scale meter (the same small overhead in each); seed k offsets the script's
        # own seeding calls by k (stepwise_agent.seeding), so K seeds are K runs even where the script pins one
        env = {NOISE_ENV: "1", SEED_ENV: str(spec.seed or 0)}
        handle = start_script(
            spec, store, label=f"ttq-{spec.name}", parent=experiment, extra_env=env
        )
        why: list[str] = []

        def watch(_: dict[str, Any]) -> None:
            if why:
                return
            c = curve_of(handle.run_dir, store.read_steps(handle.run_id), metric)
            refusal = _refused(spec, handle.run_dir)
            if refusal is not None:
                why.append(f"not applied: {refusal}")
            elif budget.seconds is not None and c.end_s >= budget.seconds:
                why.append(f"its budget of {budget.seconds:g} s ran out")
            elif (
                stop_at is not None
                and time_to_target(seen(c, metric), stop_at.value, stop_at.goal) is not None
            ):
                why.append("it reached the target")
            if why:
                handle.cancel(f"stopped by to-quality: {why[0]}")

        result = follow(handle, watch, None, poll_s=poll_s)
        steps = store.read_steps(handle.run_id)
        if (
            budget.steps is not None and not steps.empty
        ):  # the launcher's closing profiled step is not the arm's
            steps = steps[steps["step"] < budget.steps]
        c = curve_of(handle.run_dir, steps, metric)
        if budget.seconds is not None:
            c = c.cut(budget.seconds)
        load = (
            trial_load(store.read_telemetry(handle.run_id), steps, 1) if not steps.empty else None
        )
        seeding = read_json(handle.run_dir / SEED_FILE)
        return QualityRun(
            result.status.value,
            c,
            str(handle.run_dir),
            result.error,
            why[0] if why else None,
            result.step_time_ms,
            seeding if isinstance(seeding, dict) else None,
            load.others_cores if load is not None else None,
            load.cores if load is not None else None,
        )

    return run_one


def _refused(spec: QualitySpec, run_dir: Path) -> str | None:
    if not (spec.inject or spec.observe):
        return None
    from advisors.quality.script_candidates import refused
    from profilers.store.files import read_json

    return refused(read_json(run_dir / "injected.json"), {**spec.inject, **spec.observe})
