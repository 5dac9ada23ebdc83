"""A :class:`~advisors.experiments.optimize.Ladder` as JSON (the ``optimize --json`` contract) and as a text table."""

from __future__ import annotations

from typing import Any

import numpy as np

from advisors.bounds import exceeded_text, exceeds, rest_got_faster
from advisors.experiments.after_ladder import final_diagnosis_json
from advisors.experiments.experiment import Arm, Experiment
from advisors.experiments.optimize import Ladder, Rung
from advisors.experiments.outcome_words import outcome
from advisors.experiments.trials import Spec, spec_changes
from profilers.run.script_spec import ScriptSpec
from advisors.stats import beside, iqr, relative_spread

SPEEDUP_BASIS = ("after_samples_per_s / before_samples_per_s: each arm's samples/s is the median over its trials "
                 "of total samples / total time of the timed steps")
SPREAD_WARNING = 0.25  # trials of one arm this far apart (relative) get a warning: the machine was noisy


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def bound_why(r: Rung[Spec]) -> str | None:
    """Why a measured gain beat its bound, when the arms' own steps show it (:func:`advisors.bounds.rest_got_faster`)."""
    e = r.experiment
    rests = [x for t in (e.reference or e.baseline).trials if (x := t.rest_ms) is not None]
    return rest_got_faster(e.fix.id, float(np.median(rests)) if rests else None, e.patched.median_step_ms)


def outcome_word(e: Experiment[Spec]) -> str:
    """The experiment's outcome word (``kept``, ``rejected: …``, ``inconclusive: …``, ``not applied: …``, ``failed: …``)."""
    return outcome(e.kept, e.reason, e.not_applied, e.speedup)


def arm_json(arm: Arm[Spec] | None) -> dict[str, Any] | None:
    if arm is None:
        return None
    spread = relative_spread([t.throughput for t in arm.trials])
    return {"label": arm.label, "status": arm.status, "runs": len(arm.outcomes), "step_time_ms": _r(arm.median_step_ms),
            "step_iqr_ms": _r(float(np.median([iqr(t.walls_ms) for t in arm.trials])) if arm.trials else None),
            "trial_spread": _r(spread),
            "warning": f"trials {spread:.0%} apart: noisy machine, wide interval" if spread > SPREAD_WARNING else None,
            "samples_per_s": _r(arm.samples_per_s), "peak_memory_mb": _r(arm.peak_memory_mb, 1),
            "error": arm.error, "host_load_avg": _r(arm.host_load, 2), "run_dirs": [o.run_dir for o in arm.outcomes if o.run_dir],
            "raw_step_ms": [list(t.walls_ms) for t in arm.trials],
            "samples_per_step": [t.samples_per_step for t in arm.trials]}


def experiment_json(e: Experiment[Spec]) -> dict[str, Any]:
    before = e.reference if e.reference is not None else e.baseline
    return {
        "fix": e.fix.id, "fix_title": e.fix.title, "spec_patch": {k: v[1] for k, v in
                                                                   e.spec_changes().items()},
        "before": arm_json(before), "after": arm_json(e.patched),
        "baseline_status": e.baseline.outcomes[0].status if e.baseline.outcomes else None,
        "speedup": _r(e.speedup), "interval": None if e.ratio is None else [_r(e.ratio.low), _r(e.ratio.high)],
        "speedup_basis": SPEEDUP_BASIS,
        "before_samples_per_s": _r(e.ratio.before if e.ratio else None),
        "after_samples_per_s": _r(e.ratio.after if e.ratio else None),
        "pair_ratios": [_r(x) for x in e.ratio.pairs] if e.ratio else [],
        "inconclusive": e.inconclusive, "outcome": outcome_word(e),
        "interval_level": e.policy.level, "min_gain": e.policy.min_gain, "kept": e.kept, "reason": e.reason,
        "loss_delta": _r(e.loss_delta, 6), "loss_step": e.loss_step, "loss_tolerance": e.policy.loss_tolerance,
        "trials": e.policy.trials, "snippet": e.fix.snippet, "not_applied": e.not_applied,
        "applied": applied_json(e),
    }


def applied_json(e: Experiment[Spec]) -> dict[str, Any] | None:
    """For a script: what was injected into the patched runs and the evidence that it acted (or why not)."""
    report = next((o.applied for o in e.patched.outcomes if o.applied is not None), None)
    if report is None:
        return None
    changed = e.spec_changes()
    knobs = report.get("knobs") or {}
    out = {k: knobs.get(k) for k in changed if k in knobs}
    if "command" in changed:  # the script's own flag or config line: the run is the user's own command
        from advisors.experiments.script_knobs import command_evidence

        said = command_evidence(tuple(changed["command"][0]), tuple(changed["command"][1]))
        out = {k: {**v, "evidence": [said, *(x for x in v.get("evidence") or [] if "not injected" not in x)]}
               if isinstance(v, dict) else v for k, v in out.items()}
    return {"knobs": out}


def where_text(where: dict[str, Any] | None) -> str | None:
    return None if not where else f"{where.get('file')}:{where.get('line')}"


def sites_text(where: dict[str, Any] | None) -> list[str]:
    """Every ``file:line`` the change covers (the first is ``where``)."""
    if not where:
        return []
    return [f"{s.get('file')}:{s.get('line')}" for s in where.get("all") or [where]]


def change_json(r: Rung[Spec], device: str) -> dict[str, Any] | None:
    """A script fix that acted, as the edit that was measured: one diff of the user's file covering every site
    the knobs acted on, or the snippet at the line. ``None`` for a fix that did not act."""
    from advisors.experiments.script_diff import render
    from advisors.experiments.script_fixes import INJECTIONS

    e = r.experiment
    if e.not_applied or not e.patched.outcomes or not isinstance(e.patched.spec, ScriptSpec):
        return None
    changes = e.spec_changes()
    if "command" in changes:  # the script's own flag or config line: the command (or config file) as changed
        from advisors.experiments.script_knobs import shown_change

        return shown_change(tuple(changes["command"][0]), tuple(changes["command"][1]))
    inj = INJECTIONS.get(e.fix.id)
    knobs = {k: v[1] for k, v in changes.items()}
    return render(e.fix, knobs, inj.target if inj else None, r.where, device).to_json()


def ladder_json(ladder: Ladder[Spec], device: str = "cpu") -> dict[str, Any]:
    rounds = [{"round": r.round, "bottleneck": r.bottleneck, "rule": r.rule, **experiment_json(r.experiment),
               "upper_bound_speedup": r.upper_bound, "cumulative_speedup": _r(r.cumulative),
               "bound_exceeded": exceeds(r.experiment.speedup, r.upper_bound),
               "bound_exceeded_why": bound_why(r) if exceeds(r.experiment.speedup, r.upper_bound) else None,
               "where": where_text(r.where), "sites": sites_text(r.where), "change": change_json(r, device)}
              for r in ladder.rungs]
    out: dict[str, Any] = {"workload": ladder.start.workload, "start_spec": ladder.start.to_dict(),
           "final_spec_changes": {k: v[1] for k, v in spec_changes(ladder.start, ladder.final).items()},
           "rounds": rounds, "total_speedup": _r(ladder.total_speedup),
           "final_diagnosis": final_diagnosis_json(ladder),
           "advice": [{"round": a.round, "bottleneck": a.bottleneck, "rule": a.rule, "fix": a.fix.id,
                       "fix_title": a.fix.title, "why": a.why, "snippet": a.fix.snippet} for a in ladder.advice],
           "not_retried": [{"fix": a.fix.id, "fix_title": a.fix.title, "why": a.why} for a in ladder.not_retried]}
    if isinstance(ladder.start, ScriptSpec):
        out["command"] = list(ladder.start.command)
    return out


def ladder_table(ladder: Ladder[Spec]) -> list[str]:
    """One line per rung: the practitioner's "baseline / fix / fix…" table, rejected attempts included."""
    lines = [f"{'step':<40}{'status':<15}{'before/s':>10}{'after/s':>10}{'speed-up':>9}{'95% interval':>16}"
             f"{'median ms':>10}{'peak MB':>9}{'cum.':>7}  verdict"]
    first = ladder.rungs[0].experiment if ladder.rungs else None
    if first is not None:
        lines.append(_row("baseline", first.baseline, None, None, 1.0, ""))
        if first.reference is not None:
            lines.append(_row("  (reference: budget lifted)", first.reference, None, None, None, ""))
    for r in ladder.rungs:
        e = r.experiment
        interval = f"[{beside(e.ratio.low, 1 + e.policy.min_gain)}, {e.ratio.high:.2f}]" if e.ratio else ""
        bound = f" (the diagnosis' upper bound: {r.upper_bound:.4g}x)" if r.upper_bound else ""
        if e.kept and exceeds(e.speedup, r.upper_bound):
            bound += f" — {exceeded_text(e.speedup or 0.0, r.upper_bound or 0.0, bound_why(r))}"
        verdict = ("KEPT" if e.kept else "not applied" if e.not_applied else "INCONCLUSIVE" if e.inconclusive
                   else "rejected") + f" — {e.reason}{bound}"
        verdict += f" (at {r.where['file']}:{r.where['line']})" if r.where else ""
        lines.append(_row(f"+ {e.fix.id} ({e.fix.bottleneck.value})", e.patched, e, interval,
                          r.cumulative if e.kept else None, verdict))
        fragile = e.baseline.outcomes[0] if r.round > 1 and e.baseline.outcomes else None
        if fragile is not None and not fragile.ok:
            peak = f" (peak {fragile.peak_memory_mb:.0f} MB)" if fragile.peak_memory_mb else ""
            lines.append(f"    ! the spec kept in round {r.round - 1} ended {fragile.status}{peak} when re-run as this "
                         "round's baseline: that fix is fragile here")
    lines.append("before/s, after/s: samples per second of the round's own baseline and of the patched arm (total "
                 "samples / total time of the timed steps, median over an arm's trials); speed-up = after/s ÷ "
                 "before/s, the number that decided, with its bootstrap interval over the back-to-back pairs; "
                 "median ms: the patched arm's median step, shown beside it, not the speed-up's basis")
    lines.append(f"total speedup (product of kept fixes): {ladder.total_speedup:.2f}x")
    for a in ladder.not_retried:
        lines.append(f"not re-tried ({a.fix.id}): {a.why}")
    for a in ladder.advice:
        lines.append(f"advice ({a.bottleneck}, {a.fix.id}): {a.why}")
    loads = [a.host_load for r in ladder.rungs for a in (r.experiment.baseline, r.experiment.patched)
             if a.host_load is not None]
    if loads:
        lines.append(f"machine load average during the trials: median {np.median(loads):.1f} "
                     f"(max {max(loads):.1f}) on this machine's cores")
    return lines


def _row(name: str, arm: Arm[Spec], e: Experiment[Spec] | None, interval: str | None, cumulative: float | None,
         verdict: str) -> str:
    """A row: for a rung, its own round's before and after samples/s (the ratio's) and the speed-up they give."""
    before = e.ratio.before if e is not None and e.ratio is not None else None
    after = e.ratio.after if e is not None and e.ratio is not None else arm.samples_per_s
    ms = f"{arm.median_step_ms:.1f}" if arm.median_step_ms else "-"
    peak = f"{arm.peak_memory_mb:.0f}" if arm.peak_memory_mb else "-"
    sp = f"{e.speedup:.2f}x" if e is not None and e.speedup else ""
    cum = f"{cumulative:.2f}x" if cumulative else ""
    b = f"{before:.1f}" if before else ""
    a = f"{after:.1f}" if after else "-"
    return (f"{name:<40}{arm.status:<15}{b:>10}{a:>10}{sp:>9}{interval or '':>16}{ms:>10}{peak:>9}{cum:>7}  "
            f"{verdict}")
