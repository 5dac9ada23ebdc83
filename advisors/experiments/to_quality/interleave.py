"""A candidate's seeds run interleaved with the baseline's (both arms share the machine's load), and the comparison
judged fairly: the A/B trials' contention rule, and seeds that are one run judged against a stated tolerance."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from advisors.experiments.to_quality.runs import AppliedFn, CurveRunFn, ProgressFn, QualityRun, QualitySpec, arm_spec
from advisors.quality import fair
from advisors.quality.arms import MIN_GAIN, TimeToTarget
from advisors.quality.candidates import Candidate
from advisors.quality.target import Budget, Target


@dataclass(frozen=True)
class Pairs:
    base: tuple[QualityRun, ...]  # the baseline's seeds, each run just before the change's seed of the same number
    runs: tuple[QualityRun, ...]
    record: Mapping[str, Any] | None
    why_not: str | None
    reruns: int = 0


def interleaved(spec: QualitySpec, patched: QualitySpec, cand: Candidate, run: CurveRunFn, budget: Budget,
                 seeds: int, target: Target, say: ProgressFn, applied: AppliedFn | None) -> Pairs:
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
                    return Pairs((*base, b), (*runs, a), record, why_not, reruns)
            if attempt == 0 and fair.contended(b.others_cores) != fair.contended(a.others_cores):
                reruns += 1
                continue
            break
        base.append(b)
        runs.append(a)
    return Pairs(tuple(base), tuple(runs), record, None, reruns)


def judged_fairly(ttt: TimeToTarget, pairs: Pairs, one_run: bool) -> tuple[TimeToTarget, str | None]:
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
