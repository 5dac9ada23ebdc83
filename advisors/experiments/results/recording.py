"""Building the one record of an Apply or a ladder (:mod:`advisors.experiments.results.record`) from what was measured.

Every number and word a surface shows of an experiment is decided here, once: the outcome word, the two
samples/s and the speed-up they give, the bound with the diagnosis it comes from, the trials with their part,
pair, round and fix, and — for a user's script — where the change goes and the change itself.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any


from advisors.bounds import Bound, exceeds
from advisors.fixes import rest_got_faster
from advisors.experiments.experiment import Arm, Experiment
from advisors.experiments.results.memory_peaks import memory_record
from advisors.experiments.results.outcome import render
from advisors.experiments.results.evidence import evidence
from advisors.experiments.results.record import (
    Attempt,
    BoundRecord,
    ExperimentRecord,
    Kind,
    LadderRecord,
    OutcomeWord,
    TrialRecord,
    baseline_moves,
    complete,
    why_stopped,
)
from advisors.experiments.results.stored_view import StoredView
from advisors.experiments.trials import RunOutcome, Spec, spec_changes
from advisors.verdict import Bottleneck
from profilers.run.script_spec import ScriptSpec, env_knobs
from profilers.store.files import read_json


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def outcome_of(e: Experiment[Spec]) -> tuple[OutcomeWord, str]:
    """``(word, word with its why)`` of an experiment, from its Outcome: one for every surface."""
    return e.outcome.word.value, render(e.outcome)  # type: ignore[return-value]  # a step-time word


def bound_record(
    bound: Bound | None, baseline: str, baseline_run: str | None, e: Experiment[Spec] | None = None
) -> BoundRecord | None:
    """A diagnosis' bound on a fix, with the diagnosis (of which run) it comes from; ``e``: the experiment it is
    read against (a measured gain above it is flagged, with why when the arms' own steps show it)."""
    if bound is None or bound.speedup is None:
        return None
    over = e is not None and e.ratio is not None and exceeds(e.speedup, bound.speedup)
    why = None
    if over and e is not None:
        why = rest_got_faster(e.fix.id, e.before.rest_ms, e.patched.step_time_ms) or _noise_why(
            e, bound.speedup
        )
    return BoundRecord(
        speedup=bound.speedup,
        assumption=bound.assumption or None,
        baseline=baseline,
        baseline_run=baseline_run,
        exceeded=over,
        exceeded_why=why,
        measured=e.speedup if over and e is not None else None,
    )


def _noise_why(e: Experiment[Spec], bound: float) -> str | None:
    """Why a gain past its bound need not mean the bound is wrong: its interval reaches below the
    bound."""
    ratio = e.ratio
    if ratio is None or ratio.low > bound:
        return None
    return (
        f"its {ratio.level:.0%} interval [{ratio.low:.2f}, {ratio.high:.2f}] reaches below the "
        "bound, so the excess may be run-to-run noise; the gain shown is not proven to be "
        "above it"
    )


def trial_records(e: Experiment[Spec], round_: int | None = None) -> tuple[TrialRecord, ...]:
    """Every run of every arm, in pair order, each with its own measured numbers."""
    out = []
    arms = (("baseline", e.baseline), ("reference", e.reference), ("patched", e.patched))
    for role, arm in arms:
        for i, o in enumerate(arm.outcomes if arm is not None else ()):
            record = trial_record(o, role, i + 1, round_, e.fix.id)
            if role != "reference" and i in e.left_out:
                record = replace(record, in_verdict=False)
            out.append(record)
    return tuple(sorted(out, key=lambda t: (t.pair, t.role != "baseline")))


def trial_record(
    o: RunOutcome, role: str, pair: int, round_: int | None, fix_id: str
) -> TrialRecord:
    """One run an experiment rests on, with its own measured numbers (those its run shows in the Runs list)."""
    t = o.trial
    return TrialRecord(
        run_id=Path(o.run_dir).name if o.run_dir else None,
        role=role,
        pair=pair,
        round=round_,
        fix_id=fix_id,
        status=o.status,
        samples_per_s=_r(t.throughput) if t else None,
        step_time_ms=_r(t.mean_ms) if t else None,
        steps=len(t.walls_ms) if t else 0,
        peak_memory_mb=_r(o.peak_memory_mb, 1),
        others_cores=_r(o.load.others_cores, 2) if o.load else None,
        error=o.error,
        rate_unit="steps/s" if o.per_step else "samples/s",
    )


def arm_device(arm: Arm[Spec]) -> str:
    """Where an arm's runs executed (``cuda`` or ``cpu``), from its first run's ``result.json``."""
    for o in arm.outcomes:
        result = read_json(Path(o.run_dir) / "result.json") if o.run_dir else None
        if isinstance(result, dict) and result.get("device"):
            return "cuda" if str(result["device"]).startswith("cuda") else "cpu"
    return "cpu"


def call_site(e: Experiment[Spec]) -> dict[str, Any] | None:
    """The call in the user's code the fix acts on, as the launcher recorded it in the runs' ``injected.json``
    (patched runs first); ``None`` when the fix has no single place."""
    from advisors.experiments.script_fixes import where_for
    from advisors.fixes.context import ScriptContext

    knobs = {
        k: v[1] for k, v in e.spec_changes().items()
    }  # what was injected: its framework switch, if any
    for o in (*e.patched.outcomes, *e.baseline.outcomes):
        applied = o.applied or {}
        if applied.get("sites"):
            ctx = ScriptContext(sites=applied["sites"], all_sites=applied.get("all_sites") or {})
            site = where_for(e.fix, ctx, knobs)
            if site is not None and site.get("file") and site.get("line"):
                return site
    return None


def script_change(
    e: Experiment[Spec], where: dict[str, Any] | None, device: str
) -> dict[str, Any] | None:
    """A script fix that acted, as the edit that was measured: one diff of the user's file covering every site
    the knobs acted on, the snippet at the line, or the command (config file) as changed. ``None`` otherwise."""
    from advisors.experiments.script_diff import render
    from advisors.fixes import spec_of

    if e.not_applied or not e.patched.outcomes or not isinstance(e.patched.spec, ScriptSpec):
        return None
    changes = e.spec_changes()
    if "command" in changes:  # the script's own flag or config line
        from advisors.fixes.conventions.shown import shown_change

        return shown_change(tuple(changes["command"][0]), tuple(changes["command"][1]))
    env = env_knobs({k: v[1] for k, v in changes.items() if v[1] is not None})
    if env:  # variables the patched arm started with: the user's command with them in front
        from advisors.fixes.conventions.shown import shown_change

        command = tuple(e.patched.spec.command)
        return shown_change(command, (*(f"{k}={v}" for k, v in env.items()), *command))
    inj = spec_of(e.fix.id).injection
    return render(
        e.fix, {k: v[1] for k, v in changes.items()}, inj.target if inj else None, where, device
    ).to_json()


def experiment_record(
    e: Experiment[Spec],
    kind: Kind = "apply",
    round_: int | None = None,
    bound: BoundRecord | None = None,
    where: dict[str, Any] | None = None,
    bottleneck: str | None = None,
    rule: str | None = None,
    cumulative: float | None = None,
) -> ExperimentRecord:
    """The record of one experiment (see :mod:`advisors.experiments.results.record`). ``where``: the call site a ladder
    round knows; an Apply on a script finds its own from the runs' ``injected.json``."""
    word, text = outcome_of(e)
    before, script = e.before, isinstance(e.patched.spec, ScriptSpec)
    site = where if where is not None else (call_site(e) if script else None)
    measured = (
        script_change(e, site, arm_device(e.patched)) if script else None
    )  # every fix that acted
    ratio = e.ratio
    return ExperimentRecord(
        kind=kind,
        round=round_,
        fix_id=e.fix.id,
        fix_title=e.fix.title,
        bottleneck=bottleneck or e.fix.bottleneck.value,
        rule=rule,
        acts_on=e.fix.bottleneck.value,
        outcome=word,
        outcome_text=text,
        reason=e.reason,
        outcome_why=e.outcome.why.value,
        before_label=before.label,
        rate_unit="steps/s"
        if any(o.per_step for a in (before, e.patched) for o in a.outcomes)
        else "samples/s",
        # unrounded, so a reader redoes after ÷ before exactly; every surface rounds only when it prints
        before_samples_per_s=ratio.before if ratio else None,
        after_samples_per_s=ratio.after if ratio else None,
        speedup=e.speedup,
        low=ratio.low if ratio else None,
        high=ratio.high if ratio else None,
        level=e.policy.level,
        min_gain=e.policy.min_gain,
        pair_ratios=tuple(ratio.pairs) if ratio else (),
        before_step_ms=_r(before.step_time_ms),
        after_step_ms=_r(e.patched.step_time_ms),
        before_typical_ms=_r(before.median_step_ms),
        after_typical_ms=_r(e.patched.median_step_ms),
        bound=bound,
        loss_delta=_r(e.loss_delta, 6),
        loss_step=e.loss_step,
        loss_tolerance=e.policy.loss_tolerance,
        not_applied=e.not_applied,
        inconclusive=e.inconclusive,
        trials_per_arm=e.policy.trials,
        runs_in_verdict=len(ratio.pairs) if ratio and ratio.pairs else None,
        cumulative_speedup=cumulative if cumulative is not None and e.kept else None,
        spec_change={k: v[1] for k, v in spec_changes(e.baseline.spec, e.patched.spec).items()},
        injected=script,
        where=f"{site.get('file')}:{site.get('line')}" if site else None,
        sites=tuple(f"{s.get('file')}:{s.get('line')}" for s in (site.get("all") or [site]))
        if site
        else (),
        change=measured,
        snippet=e.fix.snippet,
        trials=trial_records(e, round_),
        memory=memory_record(before, e.patched) if e.fix.bottleneck == Bottleneck.MEMORY else None,
    )


def ladder_record(ladder: Any, rounds_asked: int | None) -> LadderRecord:
    """The record of a ladder (:class:`~advisors.experiments.optimize.Ladder`): one record per round's attempt,
    each bound labelled with the diagnosis it comes from (that round's baseline run)."""
    rounds = baseline_moves(
        tuple(
            experiment_record(
                r.experiment,
                "ladder round",
                r.round,
                bound_record(
                    r.bound,
                    f"the diagnosis of round {r.round}'s baseline run",
                    r.diagnosed_run,
                    r.experiment,
                ),
                r.where,
                r.bottleneck,
                r.rule,
                r.cumulative,
            )
            for r in ladder.rungs
        )
    )
    d = ladder.last_diagnosis
    last = d.bottleneck.value if d is not None else None
    return LadderRecord(
        rounds=rounds,
        total_speedup=float(ladder.total_speedup),
        rounds_asked=rounds_asked,
        why_stopped=why_stopped(rounds, rounds_asked, last),
        complete=complete(rounds, rounds_asked),
        last_bottleneck=last,
        advice=tuple(
            Attempt(a.fix.id, a.fix.title, a.why, a.round, a.bottleneck, a.rule, a.fix.snippet)
            for a in ladder.advice
        ),
        not_retried=tuple(Attempt(a.fix.id, a.fix.title, a.why) for a in ladder.not_retried),
        diagnosis=trial_record(ladder.diagnosis_run, "diagnosis", 0, 1, "")
        if getattr(ladder, "diagnosis_run", None) is not None
        else None,
    )


def applied(
    e: Experiment[Spec], diagnosis: Any, baseline: str, baseline_run: str | None
) -> StoredView:
    """An Apply as every surface reads it (a :class:`~advisors.experiments.results.stored_view.StoredView`): its
    record, with the bound of ``diagnosis`` (the one shown when it was applied, of the run ``baseline_run``, named
    ``baseline``), and its charts' inputs."""
    from advisors.diagnosis import bound_for

    bound = bound_record(
        bound_for(diagnosis, e.fix.id) if diagnosis is not None else None, baseline, baseline_run, e
    )
    return StoredView(
        "apply", record=experiment_record(e, "apply", bound=bound), evidence=evidence(e)
    )
