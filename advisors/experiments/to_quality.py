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
when early stopping is a candidate the baseline runs its whole budget). Then each candidate's seeds run
**interleaved** with the baseline's again (baseline seed s, the change's seed s, …), both timed to the target: the
two arms share the machine's load. Each run's other-programs load is recorded as an A/B trial's is
(:func:`~advisors.experiments.trial_load.trial_load`); a pair with one contended run is run again once, and a
verdict the difference in load could explain is ``inconclusive`` with why (the A/B rule,
:func:`advisors.quality.fair.contention_verdict`). No arm reaches the target before its first real optimizer step.
Seeds are the same per arm (``seed`` = 0 … K−1: model init, data order and, on a workload, the synthetic data
itself) and differ even where the script pins its own: seed k offsets the script's seeding calls by k
(:mod:`stepwise_agent.seeding`, recorded per run). Seeds whose curves are still the same are one run, said so,
and judged against a stated tolerance, never a spread of zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from advisors.quality import early_stop
from advisors.quality.arms import MIN_GAIN, ArmTime, TimeToTarget, compare
from advisors.quality.candidates import EARLY_STOPPING, Candidate
from advisors.quality.goodput import GoodputPlan, Prediction
from advisors.quality.curve import (Curve, Goal, clock_start_ns, loss_curve_from_steps, printed_curve, smoothed,
                                    time_to_target)
from advisors.quality.target import LOSS_METRIC, Budget, Target, from_baseline
from profilers.errors import SpecError
from advisors.fixes.conventions.editing import with_flag
from profilers.run.script_spec import MAX_STEPS, ScriptSpec
from profilers.store.runs import RunStore
from profilers.store.files import read_json
from stepwise_agent.noise_scale import ENV as NOISE_ENV
from stepwise_agent.seeding import ENV as SEED_ENV, FILE as SEED_FILE
from advisors.experiments.trial_load import trial_load
from advisors.quality import fair

QualitySpec = ScriptSpec  # a sample workload's runs are its training script's
ProgressFn = Callable[[str], None]


@dataclass(frozen=True)
class QualityRun:
    """One seed of one arm: its status, its (raw) curve, its folder; ``stopped`` why it ended before its budget."""

    status: str
    curve: Curve
    run_dir: str | None = None
    error: str | None = None
    stopped: str | None = None
    median_step_ms: float | None = None
    seeding: Mapping[str, Any] | None = None  # seeds.json: the script's seeding calls the agent offset
    others_cores: float | None = None  # other programs' mean use of the machine over its steps (trial_load)
    cores: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok" or (self.status == "killed" and self.stopped is not None)


#: Runs one arm's spec to a :class:`QualityRun`; ``stop_at`` is the target to stop at, when known.
CurveRunFn = Callable[[QualitySpec, "Target | None"], QualityRun]
#: A candidate made concrete from the baseline's runs (a script's: its optimizer and DataLoader), or advice.
ResolveFn = Callable[[Candidate, Sequence[QualityRun]], Candidate]
#: What a candidate's run injected (for the report) and why it did not act (``None``: it acted).
AppliedFn = Callable[[Candidate, QualityRun], "tuple[Mapping[str, Any] | None, str | None]"]
#: The noise scale read off the baseline's runs, the probe's step times and the batch candidates they choose.
PlanFn = Callable[[QualitySpec, Sequence[QualityRun]], "GoodputPlan | None"]


@dataclass(frozen=True)
class QualityRound:
    """One candidate judged at the target: ``time_to_target`` for a run change, ``early_stopping`` for early
    stopping (measured on the baseline's curves); an advice-only candidate has neither."""

    round: int
    candidate: Candidate
    spec: QualitySpec | None
    runs: tuple[QualityRun, ...]
    time_to_target: TimeToTarget | None
    early_stopping: early_stop.EarlyStopping | None
    kept: bool
    reason: str
    applied: Mapping[str, Any] | None = None  # what was injected (a script's candidate): knobs, evidence, sites
    not_applied: str | None = None  # why the change did not act: then it was not judged
    predicted: Prediction | None = None  # from the noise scale, before the arm ran (batch or accumulation × k)
    baseline_runs: tuple[QualityRun, ...] = ()  # the baseline's seeds run interleaved with this arm's
    inconclusive: str | None = None  # why the verdict cannot stand (other programs' load): neither kept nor not

    @property
    def outcome(self) -> str:
        """The round's one word: kept, rejected, inconclusive, not applied, or advice."""
        if self.not_applied is not None:
            return "not applied"
        if self.inconclusive is not None:
            return "inconclusive"
        if self.early_stopping is not None:
            return self.early_stopping.outcome
        if self.time_to_target is None:
            return "advice"
        return "kept" if self.kept else "rejected"


@dataclass(frozen=True)
class QualityLadder:
    target: Target
    budget: Budget
    seeds: int
    start: QualitySpec
    baseline: tuple[QualityRun, ...]
    rounds: tuple[QualityRound, ...]
    advice: tuple[Candidate, ...]
    plan: GoodputPlan | None = None  # the noise scale and what it predicts (None: not measured)
    whole_runs: tuple[QualityRun, ...] = ()  # the baseline to its own end: where early stopping is judged
    whole_budget: Budget | None = None
    whole_label: str | None = None  # how far the whole run went, in words
    one_run: bool = False  # the baseline's seeds gave the same curve: they are one run (fair.one_run)
    start_band: tuple[float, float] | None = None  # the baseline's raw values over its first points

    @property
    def kept(self) -> tuple[QualityRound, ...]:
        return tuple(r for r in self.rounds if r.kept)


def arm_spec(spec: QualitySpec, budget: Budget, seed: int) -> QualitySpec:
    """``spec`` as one seed of a to-quality arm: its budget's length, no profiler window. The launcher seeds torch,
    ``random`` and numpy at boot; a command that names its own ``--seed`` (a sample workload's) reseeds with it, so
    the seed goes there too."""
    steps = min(budget.steps or MAX_STEPS, MAX_STEPS)
    command = spec.command
    if any(a.split("=", 1)[0] == "--seed" for a in command):
        command = with_flag(command, ["--seed"], str(seed))
    return replace(spec, seed=seed, warmup_steps=0, measure_steps=steps, profile_steps=1, command=command)


def curve_of(run_dir: Path, steps: pd.DataFrame, metric: str | None) -> Curve:
    """The run's training loss (raw) or, with ``metric``, the value its printed lines carry."""
    loss = loss_curve_from_steps(steps)
    if metric is None:
        return loss
    from profilers.store.files import read_jsonl

    t0 = clock_start_ns(steps)
    rows = [r for r in read_jsonl(run_dir / "printed.jsonl") if isinstance(r, dict)]
    if t0 is None:
        t0 = min((int(r.get("t_unix_ns", 0)) for r in rows), default=0)
    lines = [((int(r.get("t_unix_ns", 0)) - t0) / 1e9, str(r.get("line", ""))) for r in rows]
    return printed_curve([(t, ln) for t, ln in lines if t >= 0], metric, loss.end_s,
                         steps_at=list(zip(loss.times_s, loss.steps)))


def seen(curve: Curve, metric: str | None) -> Curve:
    """The curve the target is judged on: the loss smoothed, a printed metric as printed."""
    return smoothed(curve) if metric is None else curve


def store_curve_runner(store: RunStore, budget: Budget, metric: str | None = None,
                       experiment: str | None = None, poll_s: float = 0.5) -> CurveRunFn:
    """The real :data:`CurveRunFn`: runs the arm's spec in ``store`` and stops it once its curve reaches the
    target (when one is known) or its clock passes a budget in seconds — or, for a script, as soon as the agent
    refused a convergence change it was asked to inject (the run cannot judge it: "not applied")."""
    from profilers.run.handle import follow

    def run_one(spec: QualitySpec, stop_at: Target | None) -> QualityRun:
        from profilers.run.launch import start_script

        # every arm carries the noise-scale meter (the same small overhead in each); seed k offsets the script's
        # own seeding calls by k (stepwise_agent.seeding), so K seeds are K runs even where the script pins one
        env = {NOISE_ENV: "1", SEED_ENV: str(spec.seed or 0)}
        handle = start_script(spec, store, label=f"ttq-{spec.name}", parent=experiment, extra_env=env)
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
            elif stop_at is not None and time_to_target(seen(c, metric), stop_at.value, stop_at.goal) is not None:
                why.append("it reached the target")
            if why:
                handle.cancel(f"stopped by to-quality: {why[0]}")

        result = follow(handle, watch, None, poll_s=poll_s)
        steps = store.read_steps(handle.run_id)
        if budget.steps is not None and not steps.empty:  # the launcher's closing profiled step is not the arm's
            steps = steps[steps["step"] < budget.steps]
        c = curve_of(handle.run_dir, steps, metric)
        if budget.seconds is not None:
            c = c.cut(budget.seconds)
        load = trial_load(store.read_telemetry(handle.run_id), steps, 1) if not steps.empty else None
        seeding = read_json(handle.run_dir / SEED_FILE)
        return QualityRun(result.status.value, c, str(handle.run_dir), result.error, why[0] if why else None,
                          result.step_time_ms, seeding if isinstance(seeding, dict) else None,
                          load.others_cores if load is not None else None, load.cores if load is not None else None)

    return run_one


def _refused(spec: QualitySpec, run_dir: Path) -> str | None:
    if not (spec.inject or spec.observe):
        return None
    from advisors.quality.script_candidates import refused
    from profilers.store.files import read_json

    return refused(read_json(run_dir / "injected.json"), {**spec.inject, **spec.observe})


def to_quality(spec: QualitySpec, candidates: Sequence[Candidate], run: CurveRunFn, budget: Budget, seeds: int,
               goal: Goal = "min", target_value: float | None = None, metric: str | None = None,
               apply: Callable[[QualitySpec, Candidate], QualitySpec] | None = None,
               on_progress: ProgressFn | None = None, resolve: ResolveFn | None = None,
               applied: AppliedFn | None = None, planner: PlanFn | None = None,
               run_whole: CurveRunFn | None = None, whole_budget: Budget | None = None,
               whole_label: str | None = None) -> QualityLadder:
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
    given = None if target_value is None else Target(metric or LOSS_METRIC, target_value, goal,
                                                     "given" if metric is None else "printed metric",
                                                     "" if metric is None else f"--target {target_value:g}")
    base_runs = []
    # early stopping is measured on the baseline's whole curves: without a whole-run runner the baseline runs
    # its budget for it (the older, truncated judgement)
    base_stop = None if run_whole is None and any(c.id == EARLY_STOPPING for c in candidates) else given
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
            raise SpecError(f"no target: {err}; the baseline runs ended {[r.status for r in base_runs]} "
                            f"({next((r.error for r in base_runs if r.error), 'no error recorded')})") from None
        if metric is not None:
            target = replace(target, source="printed metric", note=f"{target.note}, of the baseline's curve")
    band = fair.start_noise([r.curve for r in base_runs])
    if (noisy := fair.clear_of_start(target.value, goal, band)) is not None:
        raise SpecError(f"{noisy}; give a --target beyond it or a longer --budget (the baseline ran "
                        f"{budget.describe()})")
    base_one_run = fair.one_run([r.curve for r in base_runs])
    if base_one_run:
        say(f"the {seeds} baseline seeds gave the same curve: they are one run (the script's seed could not be "
            f"varied); verdicts use a stated tolerance of {fair.ONE_RUN_TOLERANCE:.0%}")
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
    for cand in candidates:
        n = len(rounds) + 1
        if resolve is not None:
            cand = resolve(cand, base_runs)
        if cand.id == EARLY_STOPPING:
            judged = [seen(r.curve, metric) for r in whole] if whole else curves
            es = early_stop.measure(judged, goal, target=given.value if given is not None else None,
                                    one_run=fair.one_run(judged))
            label = whole_label or f"its own end ({(whole_budget or budget).describe()})"
            where = (f"judged on the baseline run to {label}, "
                     f"{len(whole)} seed(s)): " if whole else f"judged on the budget's runs ({budget.describe()}): ")
            rounds.append(QualityRound(n, cand, None, tuple(whole), None, es, es.kept, where + es.reason))
            continue
        if cand.patch is None or apply is None:
            advice.append(cand)
            continue
        try:
            patched = apply(spec, cand)
        except SpecError as err:
            advice.append(replace(cand, advice=f"cannot run here: {err}"))
            continue
        pairs = _interleaved(spec, patched, cand, run, budget, seeds, target, say, applied)
        if pairs.why_not is not None:
            rounds.append(QualityRound(n, cand, patched, pairs.runs, None, None, False,
                                       f"not applied: {pairs.why_not}", pairs.record, pairs.why_not,
                                       baseline_runs=pairs.base))
            continue
        first = fair.first_counted_step(cand.patch)
        ttt = compare(ArmTime(tuple(reached_at(r, target, metric) for r in pairs.base)),
                      ArmTime(tuple(reached_at(r, target, metric, first) for r in pairs.runs)))
        ttt, why = _judged_fairly(ttt, pairs, base_one_run)
        rounds.append(QualityRound(n, cand, patched, pairs.runs, ttt, None, ttt.kept, ttt.reason, pairs.record,
                                   predicted=plan.predicted(cand.id) if plan is not None else None,
                                   baseline_runs=pairs.base, inconclusive=why))
    return QualityLadder(target, budget, seeds, spec, tuple(base_runs), tuple(rounds), tuple(advice), plan,
                         tuple(whole), whole_budget if whole else None,
                         (whole_label or f"its own end ({(whole_budget or budget).describe()})") if whole else None,
                         base_one_run, band)


@dataclass(frozen=True)
class _Pairs:
    base: tuple[QualityRun, ...]  # the baseline's seeds, each run just before the change's seed of the same number
    runs: tuple[QualityRun, ...]
    record: Mapping[str, Any] | None
    why_not: str | None
    reruns: int = 0


def _interleaved(spec: QualitySpec, patched: QualitySpec, cand: Candidate, run: CurveRunFn, budget: Budget,
                 seeds: int, target: Target, say: ProgressFn, applied: AppliedFn | None) -> _Pairs:
    """Baseline seed s, then the change's seed s, for every s: both arms see the same stretch of the machine's
    load. A pair in which other programs took a contended share of the machine during one run only is run again,
    once (the A/B trials' record: :mod:`advisors.experiments.trial_load`)."""
    base: list[QualityRun] = []
    runs: list[QualityRun] = []
    record: Mapping[str, Any] | None = None
    reruns = 0
    for s in range(seeds):
        for attempt in (0, 1):
            say(f"{cand.title}: seed {s + 1}/{seeds} (baseline, then the change)" +
                (", again: other programs were busy during one run" if attempt else ""))
            b = run(arm_spec(spec, budget, s), target)
            a = run(arm_spec(patched, budget, s), target)
            if applied is not None:
                seen_here, why_not = applied(cand, a)
                record = record or seen_here
                if why_not is not None:
                    return _Pairs((*base, b), (*runs, a), record, why_not, reruns)
            if attempt == 0 and fair.contended(b.others_cores) != fair.contended(a.others_cores):
                reruns += 1
                continue
            break
        base.append(b)
        runs.append(a)
    return _Pairs(tuple(base), tuple(runs), record, None, reruns)


def _judged_fairly(ttt: TimeToTarget, pairs: _Pairs, one_run: bool) -> tuple[TimeToTarget, str | None]:
    """The comparison with the contention rule applied (``inconclusive`` with why) and, where the seeds were one
    run, judged against :data:`~advisors.quality.fair.ONE_RUN_TOLERANCE` instead of a spread of zero."""
    ratio = ttt.ratio
    if ratio is None:
        return ttt, None
    if one_run and fair.one_run([r.curve for r in pairs.runs]):
        tol = fair.ONE_RUN_TOLERANCE
        kept = ratio > 1 + max(MIN_GAIN, tol)
        verb = "kept" if kept else "rejected"
        ttt = replace(ttt, kept=kept, interval=None,
                      reason=f"{verb}: the {ttt.before.seeds} seeds of each arm are one run (the same curve: the "
                             f"script's seed could not be varied), so there is no spread to judge by; "
                             f"{ratio:.2f}× sooner against a stated tolerance of {tol:.0%}")
    cores = pairs.base[0].cores if pairs.base else None
    before = fair.ArmLoad(tuple(r.others_cores for r in pairs.base), cores)
    after = fair.ArmLoad(tuple(r.others_cores for r in pairs.runs), cores)
    slower = ttt.interval is not None and ttt.interval[1] < 1
    why = fair.contention_verdict(ratio, ttt.kept, slower, before, after, 1 + MIN_GAIN)
    if why is None:
        return ttt, None
    rerun = f" ({pairs.reruns} pair(s) already run again)" if pairs.reruns else ""
    return replace(ttt, kept=False, reason=f"inconclusive: {why}{rerun}; run it on a quieter machine"), why


def steps_to_target(run: QualityRun, target: Target, metric: str | None) -> int | None:
    """The optimizer steps done when the run first reached the target (``None``: never)."""
    c = seen(run.curve, metric)
    t = time_to_target(c, target.value, target.goal)
    if t is None or not math.isfinite(t):
        return None
    return next((s for tt, s in zip(c.times_s, c.steps) if tt >= t), c.steps[-1] if len(c) else None)


def reached_at(run: QualityRun, target: Target, metric: str | None, first_step: int = 2) -> float | None:
    """Seconds to the target, counted only from ``first_step`` (the first value after a real optimizer update)."""
    counted = fair.after_first_update(seen(run.curve, metric), first_step, printed=metric is not None)
    t = time_to_target(counted, target.value, target.goal)
    return t if t is not None and math.isfinite(t) else None

