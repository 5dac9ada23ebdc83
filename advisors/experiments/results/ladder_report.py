"""A ladder as JSON (the ``optimize --json`` contract) and as a text table, rendered from its record
(:mod:`advisors.experiments.results.record`) with each arm's raw measurements beside it."""

from __future__ import annotations

from typing import Any

import numpy as np

from advisors.experiments.after_ladder import final_diagnosis_json
from advisors.experiments.experiment import Arm, Experiment
from advisors.experiments.optimize import Ladder
from advisors.experiments.results.record import ExperimentRecord, LadderRecord
from advisors.experiments.results.recording import ladder_record
from advisors.experiments.trials import Spec, spec_changes
from profilers.run.script_spec import ScriptSpec
from advisors.stats import beside, iqr, relative_spread

SPEEDUP_BASIS = (
    "after_samples_per_s / before_samples_per_s: each arm's samples/s is the median over its trials "
    "of total samples / total time of the timed steps"
)
SPREAD_WARNING = (
    0.25  # trials of one arm this far apart (relative) get a warning: the machine was noisy
)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def arm_json(arm: Arm[Spec] | None, samples_per_s: float | None) -> dict[str, Any] | None:
    """An arm's runs as JSON; ``samples_per_s`` is the record's (the median over the trials the verdict used)."""
    if arm is None:
        return None
    spread = relative_spread([t.throughput for t in arm.trials])
    return {
        "label": arm.label,
        "status": arm.status,
        "runs": len(arm.outcomes),
        "step_time_ms": _r(arm.step_time_ms),
        "typical_step_ms": _r(arm.median_step_ms),
        "step_iqr_ms": _r(
            float(np.median([iqr(t.walls_ms) for t in arm.trials])) if arm.trials else None
        ),
        "trial_spread": _r(spread),
        "warning": f"trials {spread:.0%} apart: noisy machine, wide interval"
        if spread > SPREAD_WARNING
        else None,
        "samples_per_s": samples_per_s,
        "peak_memory_mb": _r(arm.peak_memory_mb, 1),
        "error": arm.error,
        "host_load_avg": _r(arm.host_load, 2),
        "run_dirs": [o.run_dir for o in arm.outcomes if o.run_dir],
        "raw_step_ms": [list(t.walls_ms) for t in arm.trials],
        "samples_per_step": [t.samples_per_step for t in arm.trials],
    }


def experiment_json(e: Experiment[Spec], rec: ExperimentRecord) -> dict[str, Any]:
    """An experiment as JSON: its record's numbers and words (the one place they are decided), with the arms'
    raw measurements beside them."""
    bound = rec.bound
    return {
        "fix": rec.fix_id,
        "fix_title": rec.fix_title,
        "spec_patch": dict(rec.spec_change),
        "before": arm_json(e.before, rec.before_samples_per_s),
        "after": arm_json(e.patched, rec.after_samples_per_s),
        "baseline_status": e.baseline.outcomes[0].status if e.baseline.outcomes else None,
        "speedup": rec.speedup,
        "interval": None if rec.low is None else [rec.low, rec.high],
        "speedup_basis": SPEEDUP_BASIS,
        "rate_unit": rec.rate_unit,
        "before_samples_per_s": rec.before_samples_per_s,
        "after_samples_per_s": rec.after_samples_per_s,
        "pair_ratios": list(rec.pair_ratios),
        "inconclusive": rec.inconclusive,
        "outcome": rec.outcome_text,
        "outcome_word": rec.outcome,
        "outcome_why": rec.outcome_why,
        "interval_level": rec.level,
        "min_gain": rec.min_gain,
        "kept": rec.outcome == "kept",
        "reason": rec.reason,
        "loss_delta": rec.loss_delta,
        "loss_step": rec.loss_step,
        "loss_tolerance": rec.loss_tolerance,
        "trials": rec.runs_per_arm,
        "trials_asked": rec.trials_per_arm,
        "snippet": rec.snippet,
        "not_applied": rec.not_applied,
        "applied": applied_json(e),
        "upper_bound_speedup": bound.speedup if bound else None,
        "bound": None
        if bound is None
        else {
            "speedup": bound.speedup,
            "assumption": bound.assumption,
            "baseline": bound.baseline,
            "baseline_run": bound.baseline_run,
        },
        "bound_exceeded": bool(bound and bound.exceeded),
        "bound_exceeded_why": bound.exceeded_why if bound else None,
        "beyond_bound": rec.beyond_bound,
        "where": rec.where,
        "sites": list(rec.sites),
        "change": rec.change,
        "trial_runs": [t.__dict__ for t in rec.trials],
        "baseline_drift": rec.baseline_drift,
        "baseline_moved": rec.baseline_moved,
        "memory": rec.memory.to_json() if rec.memory is not None else None,
    }


def applied_json(e: Experiment[Spec]) -> dict[str, Any] | None:
    """For a script: what was injected into the patched runs and the evidence that it acted (or why not)."""
    report = next((o.applied for o in e.patched.outcomes if o.applied is not None), None)
    if report is None:
        return None
    changed = e.spec_changes()
    knobs = report.get("knobs") or {}
    out = {k: knobs.get(k) for k in changed if k in knobs}
    if (
        "command" in changed
    ):  # the script's own flag or config line: the run is the user's own command
        from advisors.fixes.conventions.shown import command_evidence

        said = command_evidence(tuple(changed["command"][0]), tuple(changed["command"][1]))
        out = {
            k: {
                **v,
                "evidence": [
                    said,
                    *(x for x in v.get("evidence") or [] if "not injected" not in x),
                ],
            }
            if isinstance(v, dict)
            else v
            for k, v in out.items()
        }
    crashed = next((o for o in e.patched.outcomes if o.status != "ok"), None)
    if (
        crashed is not None
    ):  # whether a knob acted was never seen: the run stopped first (never "refused")
        why = (
            f"the patched run ended {crashed.status} after {crashed.steps_done} step(s), before its effect could "
            f"be seen: {(crashed.error or 'no error stored').strip().splitlines()[0]}"
        )
        out = {
            k: {**v, "acted": False, "refused": False, "why": why}
            if isinstance(v, dict) and not v.get("acted")
            else v
            for k, v in out.items()
        }
    return {"knobs": out}


def ladder_json(ladder: Ladder[Spec], rec: LadderRecord | None = None) -> dict[str, Any]:
    """The ``optimize --json`` contract: each round from its record (:func:`~advisors.experiments.results.recording.
    ladder_record`, built here when the caller has not built it already)."""
    rec = rec if rec is not None else ladder_record(ladder, None)
    rounds = [
        {
            "round": x.round,
            "bottleneck": x.bottleneck,
            "rule": x.rule,
            **experiment_json(r.experiment, x),
            "cumulative_speedup": _r(r.cumulative),
        }
        for r, x in zip(ladder.rungs, rec.rounds)
    ]
    out: dict[str, Any] = {
        "workload": ladder.start.workload,
        "start_spec": ladder.start.to_dict(),
        "final_spec_changes": {
            k: v[1] for k, v in spec_changes(ladder.start, ladder.final).items()
        },
        "rounds": rounds,
        "total_speedup": rec.total_speedup,
        "why_stopped": rec.why_stopped,
        "final_diagnosis": final_diagnosis_json(ladder),
        "advice": [
            {
                "round": a.round,
                "bottleneck": a.bottleneck,
                "rule": a.rule,
                "fix": a.fix_id,
                "fix_title": a.fix_title,
                "why": a.why,
                "snippet": a.snippet,
            }
            for a in rec.advice
        ],
        "not_retried": [
            {"fix": a.fix_id, "fix_title": a.fix_title, "why": a.why} for a in rec.not_retried
        ],
    }
    if isinstance(ladder.start, ScriptSpec):
        out["command"] = list(ladder.start.command)
    return out


def ladder_table(ladder: Ladder[Spec], rec: LadderRecord | None = None) -> list[str]:
    """One line per round's attempt, from its record: the practitioner's "baseline / fix / fix…" table,
    rejected attempts included."""
    rec = rec if rec is not None else ladder_record(ladder, None)
    lines = [
        f"{'step':<40}{'status':<15}{'before/s':>10}{'after/s':>10}{'speed-up':>9}{'95% interval':>16}"
        f"{'ms/step':>10}{'peak MB':>9}{'cum.':>7}  verdict"
    ]
    first = ladder.rungs[0].experiment if ladder.rungs else None
    if first is not None:
        lines.append(_row("baseline", first.baseline, None, 1.0, ""))
        if first.reference is not None:
            lines.append(_row("  (reference: budget lifted)", first.reference, None, None, ""))
    for r, x in zip(ladder.rungs, rec.rounds):
        e = r.experiment
        # its text says why a gain passed it
        bound = f" (upper bound {x.bound.text})" if x.bound else ""
        verdict = f"{x.outcome.upper() if x.outcome in ('kept', 'inconclusive') else x.outcome} — {x.reason}{bound}"
        verdict += f" (at {x.where})" if x.where else ""
        lines.append(
            _row(f"+ {x.fix_id} ({x.acts_on})", e.patched, x, x.cumulative_speedup, verdict)
        )
        if x.memory_text is not None:
            lines.append(f"    memory: {x.memory_text}")
        if x.baseline_moved:
            lines.append(f"    ! {x.baseline_moved}")
        fragile = e.baseline.outcomes[0] if r.round > 1 and e.baseline.outcomes else None
        if fragile is not None and not fragile.ok:
            peak = f" (peak {fragile.peak_memory_mb:.0f} MB)" if fragile.peak_memory_mb else ""
            lines.append(
                f"    ! the spec kept in round {r.round - 1} ended {fragile.status}{peak} when re-run as this "
                "round's baseline: that fix is fragile here"
            )
    lines.append(
        "before/s, after/s: samples per second of the round's own baseline and of the patched arm (total "
        "samples / total time of the timed steps, median over an arm's trials); speed-up = after/s ÷ "
        "before/s, the number that decided, with its bootstrap interval over the back-to-back pairs; "
        "ms/step: the arm's time per step (one step's samples ÷ its samples/s: the same "
        "speed)"
    )
    if any(x.rate_unit != "samples/s" for x in rec.rounds):
        lines.append(
            f"{STEPS_MARK}: no batch was seen in that round: its before/s and after/s count steps"
        )
    lines.append(f"total speedup (product of kept fixes): {rec.total_speedup:.2f}x")
    lines.append(rec.why_stopped)
    for a in rec.not_retried:
        lines.append(f"not re-tried ({a.fix_id}): {a.why}")
    for a in rec.advice:
        lines.append(f"advice ({a.bottleneck}, {a.fix_id}): {a.why}")
    loads = [
        a.host_load
        for r in ladder.rungs
        for a in (r.experiment.baseline, r.experiment.patched)
        if a.host_load is not None
    ]
    if loads:
        lines.append(
            f"machine load average during the trials: median {np.median(loads):.1f} "
            f"(max {max(loads):.1f}) on this machine's cores"
        )
    return lines


STEPS_MARK = "*"  # a row whose rates count steps, not samples


def _row(
    name: str, arm: Arm[Spec], x: ExperimentRecord | None, cumulative: float | None, verdict: str
) -> str:
    """A row: for a round, its record's before and after samples/s and the speed-up they give."""
    before = x.before_samples_per_s if x is not None else None
    after = x.after_samples_per_s if x is not None else None
    ms = f"{arm.step_time_ms:.1f}" if arm.step_time_ms else "-"
    peak = f"{arm.peak_memory_mb:.0f}" if arm.peak_memory_mb else "-"
    sp = f"{x.speedup:.2f}x" if x is not None and x.speedup else ""
    if sp and x is not None and x.rate_unit != "samples/s":
        sp += STEPS_MARK
    interval = (
        f"[{beside(x.low, 1 + x.min_gain)}, {x.high:.2f}]"
        if x is not None and x.low is not None and x.high is not None
        else ""
    )
    cum = f"{cumulative:.2f}x" if cumulative else ""
    b = f"{before:.1f}" if before else ""
    a = f"{after:.1f}" if after else "-"
    return (
        f"{name:<40}{arm.status:<15}{b:>10} {a:>9} {sp:>8}{interval:>16}{ms:>10}{peak:>9}{cum:>7}  "
        f"{verdict}"
    )
