"""The JSON of ``optimize --to-quality`` (a contract: docs/how-to/time-to-quality.md) and its one-screen
table.

Top level: ``mode`` ("to_quality"), ``target`` {``metric``, ``value``, ``goal``, ``source``, ``note``},
``budget``, ``seeds``, ``baseline`` (its arm's time to target and runs), ``rounds``, ``advice``, ``projection``
and ``total_speedup``. Each round: ``round``, ``bottleneck`` ("convergence"), ``fix`` (the candidate's id —
``early_stopping`` for early stopping), ``title``, ``rule``, ``kept``, ``reason``, ``speedup`` (the time-to-target
ratio, or for early stopping the run's length over its length stopped), ``loss_delta`` (null: both arms are
held to the same target), ``time_to_target`` {``before_s``, ``after_s``, ``ratio``, ``interval``, ``seeds``,
``reached_before``, ``reached_after``, …} or null, ``early_stopping`` (the measured saving) or null, and
``curves`` (each seed's smoothed curve, at most :data:`MAX_POINTS` points); for a change injected into a
script, ``applied`` (its knobs with the agent's evidence, and the user's lines: ``sites``) and ``not_applied``
(why it did not act — then ``time_to_target`` is null and it was not judged), else null; ``change``: for an arm
run as the user's own command with its flags or config lines changed, that command line or the file's diff
(``kind``, ``file``, ``text``), else null. ``total_speedup`` is the
best kept round's ratio — rounds are each judged against the baseline, not stacked.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from advisors.fixes.conventions.shown import command_evidence, shown_change
from advisors.experiments.to_quality import (
    QualityLadder,
    QualityRound,
    QualityRun,
    reached_at,
    seen,
    steps_to_target,
)
from advisors.experiments.results.quality_record import Parts, prediction_text
from advisors.experiments.results.quality_words import noise_line
from advisors.quality.arms import ArmTime
from advisors.quality.projection import Projection
from profilers.run.script_spec import ScriptSpec

MAX_POINTS = 200


def curves_json(runs: Sequence[QualityRun], metric: str | None) -> list[dict[str, Any]]:
    out = []
    for seed, r in enumerate(runs):
        c = seen(r.curve, metric)
        idx: list[int] = (
            sorted({int(i) for i in np.linspace(0, len(c) - 1, min(len(c), MAX_POINTS))})
            if len(c)
            else []
        )
        out.append(
            {
                "seed": seed,
                "status": r.status,
                "stopped": r.stopped,
                "end_s": c.end_s,
                "t_s": [c.times_s[i] for i in idx],
                "value": [c.values[i] for i in idx],
                "step": [c.steps[i] for i in idx],
                "run_dir": r.run_dir,
                "error": r.error,
            }
        )
    return out


def round_speedup(r: QualityRound) -> float | None:
    if r.time_to_target is not None:
        return r.time_to_target.ratio
    es = r.early_stopping
    if es is not None and es.saved_share < 1:
        return 1.0 / (1.0 - es.saved_share)
    return None


def baseline_arm(ladder: QualityLadder, metric: str | None) -> ArmTime:
    """The first baseline pass's time to target, by the rounds' own rule (:func:`reached_at`)."""
    return ArmTime(tuple(reached_at(r, ladder.target, metric) for r in ladder.baseline))


def measured(ladder: QualityLadder, r: QualityRound, metric: str | None) -> dict[str, Any] | None:
    """Beside a prediction, in its two parts: the steps ratio (median optimizer steps to the target, after / before:
    each arm's seeds that reached it) × the step-time ratio (median time per optimizer step, after / before) ≈ the
    time ratio (after / before, the inverse of ``time_to_target.ratio``; it also holds start-up, so the product of
    the parts is near it, not equal). The baseline is the round's own interleaved seeds."""
    tt = r.time_to_target
    if tt is None:
        return None
    base = r.baseline_runs or ladder.baseline
    before = [s for s in (steps_to_target(x, ladder.target, metric) for x in base) if s is not None]
    # a script's injected accumulation counts every call of step() as one of the script's steps: k per update
    per = int((r.candidate.patch or {}).get("grad_accum") or 1)
    after = [
        s / per
        for s in (steps_to_target(x, ladder.target, metric) for x in r.runs)
        if s is not None
    ]
    steps = (
        float(np.median(after) / np.median(before))
        if before and after and np.median(before) > 0
        else None
    )
    ms_before = [x.median_step_ms for x in base if x.median_step_ms]
    ms_after = [x.median_step_ms * per for x in r.runs if x.median_step_ms]
    step_time = (
        float(np.median(ms_after) / np.median(ms_before)) if ms_before and ms_after else None
    )
    return {
        "steps_ratio": steps,
        "step_time_ratio": step_time,
        "steps_before": before,
        "steps_after": after,
        "step_ms_before": float(np.median(ms_before)) if ms_before else None,
        "step_ms_after": float(np.median(ms_after)) if ms_after else None,
        "time_ratio": 1 / tt.ratio if tt.ratio else None,
    }


def _loads(r: QualityRound) -> dict[str, Any] | None:
    """Other programs' cores during each seed of both arms (the contention record), when the runs recorded it."""
    if not r.runs:
        return None
    return {
        "before": [x.others_cores for x in r.baseline_runs],
        "after": [x.others_cores for x in r.runs],
        "cores": next((x.cores for x in (*r.baseline_runs, *r.runs) if x.cores), None),
    }


def own_command(ladder: QualityLadder, r: QualityRound) -> dict[str, Any]:
    """``applied`` and ``change`` of a round: an arm run as the user's own command with its flags or config lines
    changed (:mod:`advisors.experiments.quality_knobs`) says so first in each knob's evidence, and its change is
    that command line or config file's diff (as a step-time fix's: ``shown_change``); else ``change`` is null."""
    applied = dict(r.applied) if r.applied is not None else None
    start, spec = ladder.start, r.spec
    if (
        not isinstance(start, ScriptSpec)
        or not isinstance(spec, ScriptSpec)
        or spec.command == start.command
    ):
        return {"applied": applied, "change": None}
    said = command_evidence(start.command, spec.command)
    if applied is not None:
        applied["command"] = said
        applied["knobs"] = {
            k: {
                **v,
                "evidence": [
                    said,
                    *(x for x in v.get("evidence") or [] if "not injected" not in x),
                ],
            }
            for k, v in (applied.get("knobs") or {}).items()
        }
    return {"applied": applied, "change": shown_change(start.command, spec.command)}


def quality_json(
    ladder: QualityLadder,
    metric: str | None = None,
    full_run_steps: int | None = None,
    price_per_hour: float | None = None,
) -> dict[str, Any]:
    rounds = []
    for r in ladder.rounds:
        rounds.append(
            {
                "round": r.round,
                "bottleneck": "convergence",
                "fix": r.candidate.id,
                "title": r.candidate.title,
                "rule": r.candidate.rule,
                "advice": r.candidate.advice,
                "kept": r.kept,
                "outcome": r.outcome,
                "outcome_word": r.outcome,
                "outcome_why": r.outcome_why.value,
                "reason": r.reason,
                "speedup": round_speedup(r),
                "loss_delta": None,
                "time_to_target": r.time_to_target.to_json() if r.time_to_target else None,
                "early_stopping": r.early_stopping.to_json() if r.early_stopping else None,
                "changes": dict(r.candidate.patch) if r.candidate.patch is not None else None,
                **own_command(ladder, r),
                "not_applied": r.not_applied,
                "predicted": r.predicted.to_json() if r.predicted else None,
                "measured": measured(ladder, r, metric),
                "curves": curves_json(r.runs, metric),
                "baseline_curves": curves_json(r.baseline_runs, metric),
                "judged_against": list(r.judged_against),
                "inconclusive": r.inconclusive,
                "load": _loads(r),
            }
        )
    kept = [s for s in (round_speedup(r) for r in ladder.kept) if s]
    best = max(kept, default=1.0)
    steps = [r.median_step_ms for r in ladder.baseline if r.median_step_ms]
    proj = (
        Projection(
            full_run_steps or ladder.budget.steps or 0,
            float(np.median(steps)),
            best if kept else None,
            price_per_hour,
        )
        if steps and (full_run_steps or ladder.budget.steps)
        else None
    )
    return {
        "mode": "to_quality",
        "target": ladder.target.to_json(),
        "budget": {
            "steps": ladder.budget.steps,
            "seconds": ladder.budget.seconds,
            "stated": ladder.budget.describe(),
        },
        "whole_run_budget": ladder.whole_label,
        "noise_scale": ladder.plan.to_json() if ladder.plan else None,
        "seeds": ladder.seeds,
        "one_run": ladder.one_run,
        "floor": ladder.floor,
        "start_band": list(ladder.start_band) if ladder.start_band else None,
        "baseline": {
            "time_to_target": baseline_arm(ladder, metric).to_json(),
            "curves": curves_json(ladder.baseline, metric),
        },
        "interleaved_baseline": [
            {"run": i, "seed": s, "run_dir": r.run_dir, "others_cores": r.others_cores}
            for i, (r, s) in enumerate(zip(ladder.interleaved, ladder.interleaved_seeds))
        ],
        "rounds": rounds,
        "advice": [c.to_json() for c in ladder.advice],
        "projection": proj.to_json() if proj else None,
        "total_speedup": best,
    }


def quality_table(out: dict[str, Any]) -> str:
    """One line per round, for the terminal."""
    t = out["target"]
    lines = [
        f"target: {t['metric']} {'≤' if t['goal'] == 'min' else '≥'} {t['value']:.4g} ({t['source']}"
        f"{': ' + t['note'] if t['note'] else ''}); {out['seeds']} seed(s) per arm; budget "
        f"{out['budget']['stated']} per arm",
        f"baseline: {_arm(out['baseline']['time_to_target'])}",
    ]
    if out.get("one_run"):
        lines.append(
            f"the {out['seeds']} baseline seeds are one run (the same curve: the script's seed could not be "
            "varied); verdicts use a stated tolerance"
        )
    if out.get("floor"):
        lines.append(out["floor"])
    ns = out.get("noise_scale")
    if ns:
        lines.append(noise_line(ns))
    for r in out["rounds"]:
        lines.append(f"{r['round']}. {r['title']} — {r['reason']}")
        if r.get("applied") or r.get("not_applied"):
            lines.append(f"     rule: {r['rule']}")
        for knob, rec in ((r.get("applied") or {}).get("knobs") or {}).items():
            if rec.get(
                "acted"
            ):  # an arm run as the user's own command: its values checked, nothing injected
                lines.append(
                    f"     {'checked' if r.get('change') else 'injected'} {knob}: "
                    f"{'; '.join(rec.get('evidence') or [])}"
                )
        if r["time_to_target"]:
            lines.append(f"     after: {_arm(r['time_to_target']['after'])}")
        if r.get("predicted"):
            lines.append(f"     {predicted_line(r['predicted'], r.get('measured'))}")
    for a in out["advice"]:
        lines.append(f"-  {a['title']}: {a['rule']} — {a['advice'] or 'change it yourself'}")
    if out["projection"]:
        lines.append(out["projection"]["text"])
    return "\n".join(lines)


def _arm(a: dict[str, Any]) -> str:
    if a["failed"]:
        return f"FAILED: {a['seeds'] - a['reached']} of {a['seeds']} seeds never reached the target"
    spread = a["spread_s"]
    return (
        f"{a['seconds']:.3g} s to target (MLPerf mean; seeds {', '.join('never' if s is None else f'{s:.3g}' for s in a['per_seed_s'])}"
        f"; spread {spread[0]:.3g}–{spread[1]:.3g} s)"
    )


def predicted_line(pred: dict[str, Any], meas: dict[str, Any] | None) -> str:
    """Predicted and measured, each as steps ratio × step-time ratio = time ratio (after / before): the record's
    words (:func:`~advisors.experiments.results.quality_record.prediction_text`)."""
    return prediction_text(Parts.of(pred), Parts.of(meas)) or ""
