"""``optimize --to-quality``: each arm runs, K seeds, until it reaches the target or its budget; a change is kept
only when it reaches the same target sooner (:mod:`advisors.quality.arms`).

The path is today's experiments': an arm is a :class:`~profilers.run.script_spec.ScriptSpec` started by the
launcher — a user's script or a sample workload's (``python -m sample_runs.train``) — each stored in the run store
under one stored experiment. What changes is the length of a run and what is read
from it: a run goes on until its budget (steps, or seconds of its clock) and is stopped as soon as its smoothed
metric reaches a known target (the follow loop reads its ``steps.jsonl`` / ``printed.jsonl`` while it runs);
its curve is read against its own clock. No profiler window is opened in these runs (its overhead would be
charged to the arm whose profiled steps are heavier).

On a script the convergence changes are injected at boot (``stepwise_agent.inject.convergence``): each is made
concrete from the baseline's own run (``resolve``: its DataLoader, its optimizer and the rule that fits it,
:mod:`advisors.quality.script_candidates`), and each candidate run's ``injected.json`` says whether it acted
(``applied``): a change the script did not allow is stopped as soon as the agent refuses it, reported "not
applied: why" with what was injected, and never judged.

Order: the baseline's K seeds first (their curves give the target when none is given — it must lie clear of the
baseline's own noise at its start, :mod:`advisors.quality.fair` — and early stopping is measured on them: so
when early stopping is a candidate the baseline runs its whole budget). Then the candidates' seeds run
**interleaved** with the baseline's again, the baseline once per seed for all of them (baseline seed s, candidate
1's seed s, candidate 2's seed s, …; :mod:`.interleave`), all timed to the target: the arms share the machine's
load, and each round records which of those baseline runs it was judged against (``judged_against``). Each run's other-programs load is recorded as an A/B trial's is
(:func:`~advisors.experiments.trial_load.trial_load`); a pair with one contended run is run again once, and a
verdict the difference in load could explain is ``inconclusive`` with why (the A/B rule,
:func:`advisors.quality.fair.contention_verdict`). No arm reaches the target before its first real optimizer step.
Seeds are the same per arm (``seed`` = 0 … K−1: model init, data order and, on a workload, the synthetic data
itself) and differ even where the script pins its own: seed k offsets the script's seeding calls by k
(:mod:`stepwise_agent.seeding`, recorded per run). Seeds whose curves are still the same are one run, said so,
and judged against a stated tolerance, never a spread of zero.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from advisors.experiments.to_quality.interleave import interleaved, judged_fairly
from advisors.experiments.to_quality.ladder import QualityLadder, QualityRound
from advisors.experiments.to_quality.runner import store_curve_runner
from advisors.experiments.to_quality.stopping import early_stopping_round, stopping_target
from advisors.experiments.to_quality.runs import (
    AppliedFn,
    CurveRunFn,
    PlanFn,
    ProgressFn,
    QualityRun,
    QualitySpec,
    ResolveFn,
    arm_spec,
    curve_of,
    reached_at,
    seen,
    steps_to_target,
)
from advisors.quality import fair
from advisors.quality.arms import ArmTime, compare
from advisors.quality.candidates import EARLY_STOPPING, Candidate
from advisors.quality.curve import Goal
from advisors.quality.target import LOSS_METRIC, Budget, Target, from_baseline
from profilers.errors import SpecError

__all__ = [
    "AppliedFn",
    "CurveRunFn",
    "PlanFn",
    "ProgressFn",
    "QualityLadder",
    "QualityRound",
    "QualityRun",
    "QualitySpec",
    "ResolveFn",
    "arm_spec",
    "curve_of",
    "reached_at",
    "seen",
    "steps_to_target",
    "store_curve_runner",
    "to_quality",
]


def to_quality(
    spec: QualitySpec,
    candidates: Sequence[Candidate],
    run: CurveRunFn,
    budget: Budget,
    seeds: int,
    goal: Goal = "min",
    target_value: float | None = None,
    metric: str | None = None,
    apply: Callable[[QualitySpec, Candidate], QualitySpec] | None = None,
    on_progress: ProgressFn | None = None,
    resolve: ResolveFn | None = None,
    applied: AppliedFn | None = None,
    planner: PlanFn | None = None,
    run_whole: CurveRunFn | None = None,
    whole_budget: Budget | None = None,
    whole_label: str | None = None,
) -> QualityLadder:
    """Run the baseline's ``seeds``, set the target, then judge every candidate (see the module docs).
    ``resolve`` makes each candidate concrete from the baseline's runs; ``applied`` reads each candidate run's
    record of what was injected: a change that did not act is reported "not applied: why", its remaining seeds
    are not run and it is never judged. ``planner`` reads the baseline's gradient noise scale and probes the step
    time per batch: its chosen batch candidates replace the given ones and each batch or accumulation round
    carries its prediction. ``run_whole`` runs the baseline to its own end (``whole_budget``, stated): early
    stopping is judged there, on the run the user pays for, not on the budget's truncated runs."""
    if seeds < 1:
        raise SpecError(f"--seeds must be at least 1, got {seeds}")
    say = on_progress or (lambda _: None)
    given = (
        None
        if target_value is None
        else Target(
            metric or LOSS_METRIC,
            target_value,
            goal,
            "given" if metric is None else "printed metric",
            "" if metric is None else f"--target {target_value:g}",
        )
    )
    base_runs = []
    # early stopping is measured on the baseline's whole curves: without a whole-run runner the baseline runs
    # its budget for it (the older, truncated judgement)
    base_stop = (
        None if run_whole is None and any(c.id == EARLY_STOPPING for c in candidates) else given
    )
    for s in range(seeds):
        say(f"baseline seed {s + 1}/{seeds}")
        base_runs.append(run(arm_spec(spec, budget, s), base_stop))
    curves = [seen(r.curve, metric) for r in base_runs]
    if given is not None:
        target = given
    else:
        try:
            target = from_baseline(curves, budget, goal, metric or LOSS_METRIC)
        except ValueError as err:
            raise SpecError(
                f"no target: {err}; the baseline runs ended {[r.status for r in base_runs]} "
                f"({next((r.error for r in base_runs if r.error), 'no error recorded')})"
            ) from None
        if metric is not None:
            target = replace(
                target, source="printed metric", note=f"{target.note}, of the baseline's curve"
            )
    band = fair.start_noise([r.curve for r in base_runs])
    if (noisy := fair.clear_of_start(target.value, goal, band)) is not None:
        raise SpecError(
            f"{noisy}; give a --target beyond it or a longer --budget (the baseline ran "
            f"{budget.describe()})"
        )
    floor = fair.on_floor(curves, target.value, goal)
    if floor is not None:
        say(floor)
    base_one_run = fair.one_run([r.curve for r in base_runs])
    if base_one_run:
        say(
            f"the {seeds} baseline seeds gave the same curve: they are one run (the script's seed could not be "
            f"varied); verdicts use a stated tolerance of {fair.ONE_RUN_TOLERANCE:.0%}"
        )
    rounds: list[QualityRound] = []
    advice: list[Candidate] = []
    plan = planner(spec, base_runs) if planner is not None else None
    if plan is not None and plan.plan is not None:  # the noise scale chose the batch candidates
        say(f"noise scale: {plan.plan.reason}")
        candidates = [*plan.candidates, *(c for c in candidates if not c.id.startswith("batch_x"))]
    whole: list[QualityRun] = []
    if run_whole is not None and any(c.id == EARLY_STOPPING for c in candidates):
        if base_stop is None and (whole_budget is None or whole_budget == budget):
            whole = list(base_runs)  # the baseline already ran its whole budget: the same runs
        for s in range(seeds if not whole else 0):
            say(f"baseline to its own end (early stopping), seed {s + 1}/{seeds}")
            whole.append(run_whole(arm_spec(spec, whole_budget or budget, s), None))
    stop_target = (
        stopping_target(given, base_runs, goal, say)
        if any(c.id == EARLY_STOPPING for c in candidates)
        else (None, None)
    )
    slots: list[
        QualityRound | int
    ] = []  # in the candidates' order: a round, or an arm's place in the interleave
    arms: list[tuple[Candidate, QualitySpec]] = []
    for cand in candidates:
        if resolve is not None:
            cand = resolve(cand, base_runs)
        if cand.id == EARLY_STOPPING:
            slots.append(
                early_stopping_round(
                    cand,
                    whole,
                    curves,
                    metric,
                    goal,
                    stop_target,
                    budget,
                    whole_budget,
                    whole_label,
                )
            )
            continue
        if cand.patch is None or apply is None:
            advice.append(cand)
            continue
        try:
            arms.append((cand, apply(spec, cand)))
        except SpecError as err:
            advice.append(replace(cand, advice=f"cannot run here: {err}"))
            continue
        slots.append(len(arms) - 1)
    inter = interleaved(spec, arms, run, budget, seeds, target, say, applied)
    for n, slot in enumerate(slots, start=1):
        if isinstance(slot, QualityRound):
            rounds.append(replace(slot, round=n))
            continue
        (cand, patched), pairs = arms[slot], inter.pairs[slot]
        if pairs.why_not is not None:
            rounds.append(
                QualityRound(
                    n,
                    cand,
                    patched,
                    pairs.runs,
                    None,
                    None,
                    False,
                    f"not applied: {pairs.why_not}",
                    pairs.record,
                    pairs.why_not,
                    baseline_runs=pairs.base,
                    judged_against=pairs.judged_against,
                )
            )
            continue
        first = fair.first_counted_step(cand.patch)
        ttt = compare(
            ArmTime(tuple(reached_at(r, target, metric) for r in pairs.base)),
            ArmTime(tuple(reached_at(r, target, metric, first) for r in pairs.runs)),
        )
        ttt, why = judged_fairly(ttt, pairs, base_one_run)
        rounds.append(
            QualityRound(
                n,
                cand,
                patched,
                pairs.runs,
                ttt,
                None,
                ttt.kept,
                ttt.reason,
                pairs.record,
                predicted=plan.predicted(cand.id) if plan is not None else None,
                baseline_runs=pairs.base,
                inconclusive=why,
                judged_against=pairs.judged_against,
            )
        )
    return QualityLadder(
        target,
        budget,
        seeds,
        spec,
        tuple(base_runs),
        tuple(rounds),
        tuple(advice),
        plan,
        tuple(whole),
        whole_budget if whole else None,
        (whole_label or f"its own end ({(whole_budget or budget).describe()})") if whole else None,
        base_one_run,
        band,
        inter.baseline,
        inter.seeds,
        floor,
    )
