"""Early stopping's round: measured on the baseline's curves (its whole runs when they were run), against
``--target`` or, without one, the script's own metric target (:mod:`advisors.quality.script_target`), said with
where it came from; with neither, the trade-off is said and the decision left to the user."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from advisors.experiments.to_quality.ladder import QualityRound
from advisors.experiments.to_quality.runs import ProgressFn, QualityRun, seen
from advisors.quality import early_stop, fair, script_target
from advisors.quality.candidates import Candidate
from advisors.quality.curve import Curve, Goal
from advisors.quality.target import Budget, Target


def stopping_target(
    given: Target | None, base_runs: Sequence[QualityRun], goal: Goal, say: ProgressFn
) -> tuple[float | None, str | None]:
    """Early stopping's target and where it came from: ``--target``, else the script's own (when its name does not
    say the other goal: an accuracy target is not a loss's), else none."""
    if given is not None:
        return given.value, "--target"
    own = script_target.of_runs([r.run_dir for r in base_runs])
    if own is None:
        return None, None
    if own.goal is not None and own.goal != goal:
        say(
            f"{own.said} is not used: it is a target to {'maximise' if own.goal == 'max' else 'minimise'}, the "
            f"metric judged here is to {'maximise' if goal == 'max' else 'minimise'}"
        )
        return None, None
    say(f"early stopping: {own.said}")
    return own.value, own.source


def early_stopping_round(
    cand: Candidate,
    whole: Sequence[QualityRun],
    curves: Sequence[Curve],
    metric: str | None,
    goal: Goal,
    target: tuple[float | None, str | None],
    budget: Budget,
    whole_budget: Budget | None,
    whole_label: str | None,
) -> QualityRound:
    """The round (numbered later) of early stopping judged on ``whole`` (or, without, the budget's ``curves``)."""
    value, source = target
    judged = [seen(r.curve, metric) for r in whole] if whole else list(curves)
    es = early_stop.measure(judged, goal, target=value, one_run=fair.one_run(judged))
    if source is not None and source != "--target":
        es = replace(es, reason=f"target {value:g} from {source}; {es.reason}")
    es = replace(es, target_from=source)
    label = whole_label or f"its own end ({(whole_budget or budget).describe()})"
    where = (
        f"judged on the baseline run to {label}, {len(whole)} seed(s)): "
        if whole
        else f"judged on the budget's runs ({budget.describe()}): "
    )
    return QualityRound(0, cand, None, tuple(whole), None, es, es.kept, where + es.reason)
