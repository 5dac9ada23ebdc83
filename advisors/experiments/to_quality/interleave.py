"""A candidate's seeds run interleaved with the baseline's (both arms share the machine's load), and the comparison
judged fairly: the A/B trials' contention rule, and seeds that are one run judged against a stated tolerance."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from advisors.experiments.pair_verdict import leans
from advisors.experiments.results.outcome import Why
from advisors.experiments.to_quality.runs import (
    AppliedFn,
    CurveRunFn,
    ProgressFn,
    QualityRun,
    QualitySpec,
    arm_spec,
)
from advisors.quality import fair
from advisors.quality.arms import MIN_GAIN, TimeToTarget
from advisors.quality.candidates import Candidate
from advisors.quality.target import Budget, Target


@dataclass(frozen=True)
class Pairs:
    """One candidate's seeds and the baseline runs it was judged against (``judged_against``: their places in the
    interleave's baseline runs, :attr:`Interleave.baseline`, 0-based)."""

    base: tuple[
        QualityRun, ...
    ]  # the baseline's seeds, each run just before the change's seed of the same number
    runs: tuple[QualityRun, ...]
    record: Mapping[str, Any] | None
    why_not: str | None
    reruns: int = 0
    judged_against: tuple[int, ...] = ()


@dataclass(frozen=True)
class Interleave:
    """Every baseline run of the interleave (a seed's, and a seed's run again for contention) and each arm's pairs,
    in the order the arms were given."""

    baseline: tuple[QualityRun, ...]
    seeds: tuple[int, ...]  # each baseline run's seed
    pairs: tuple[Pairs, ...]


@dataclass
class _Arm:
    cand: Candidate
    patched: QualitySpec
    base: list[int] = field(default_factory=list)
    runs: list[QualityRun] = field(default_factory=list)
    record: Mapping[str, Any] | None = None
    why_not: str | None = None
    reruns: int = 0


def interleaved(
    spec: QualitySpec,
    arms: Sequence[tuple[Candidate, QualitySpec]],
    run: CurveRunFn,
    budget: Budget,
    seeds: int,
    target: Target,
    say: ProgressFn,
    applied: AppliedFn | None,
) -> Interleave:
    """Per seed s: the baseline's seed s once, then every candidate's seed s (baseline, cand 1, cand 2, …): the
    arms see the same stretch of the machine's load and the baseline is not run again per candidate. A candidate
    whose run and the baseline's differ in contention (other programs took a contended share of the machine during
    one of them only, the A/B trials' record: :mod:`advisors.experiments.trial_load`) is run again, once, after
    one more baseline run shared by every candidate that needs it. A candidate that did not act ("not applied")
    runs no further seed."""
    base: list[QualityRun] = []
    seed_of: list[int] = []
    state = [_Arm(c, p) for c, p in arms]
    for s in range(seeds):
        live = [a for a in state if a.why_not is None]
        if not live:
            break
        say(f"seed {s + 1}/{seeds}: the baseline, then " + ", ".join(a.cand.title for a in live))
        again = _seed(spec, live, run, budget, s, target, applied, base)
        seed_of.append(s)
        if again:
            say(
                f"seed {s + 1}/{seeds} again (the baseline, then "
                + ", ".join(a.cand.title for a in again)
                + "): other programs were busy during one run of a pair"
            )
            for a in again:
                a.reruns += 1
            _seed(spec, again, run, budget, s, target, applied, base, last=True)
            seed_of.append(s)
    pairs = tuple(
        Pairs(
            tuple(base[i] for i in a.base),
            tuple(a.runs),
            a.record,
            a.why_not,
            a.reruns,
            tuple(a.base),
        )
        for a in state
    )
    return Interleave(tuple(base), tuple(seed_of), pairs)


def _seed(
    spec: QualitySpec,
    arms: Sequence[_Arm],
    run: CurveRunFn,
    budget: Budget,
    s: int,
    target: Target,
    applied: AppliedFn | None,
    base: list[QualityRun],
    last: bool = False,
) -> list[_Arm]:
    """One baseline run of seed ``s`` (appended to ``base``), then each arm's; the arms to run again (contention
    differs between the pair; never when ``last``)."""
    b = run(arm_spec(spec, budget, s), target)
    base.append(b)
    again = []
    for arm in arms:
        a = run(arm_spec(arm.patched, budget, s), target)
        if applied is not None:
            seen_here, why_not = applied(arm.cand, a)
            arm.record = arm.record or seen_here
            if why_not is not None:
                arm.why_not = why_not
                arm.base.append(len(base) - 1)
                arm.runs.append(a)
                continue
        if not last and fair.contended(b.others_cores) != fair.contended(a.others_cores):
            again.append(arm)
            continue
        arm.base.append(len(base) - 1)
        arm.runs.append(a)
    return again


def judged_fairly(
    ttt: TimeToTarget, pairs: Pairs, one_run: bool
) -> tuple[TimeToTarget, str | None]:
    """The comparison with the contention rule applied (``inconclusive`` with why) and, where the seeds were one
    run, judged against :data:`~advisors.quality.fair.ONE_RUN_TOLERANCE` instead of a spread of zero."""
    ratio = ttt.ratio
    if ratio is None:
        return ttt, None
    if one_run and fair.one_run([r.curve for r in pairs.runs]):
        tol = fair.ONE_RUN_TOLERANCE
        kept = ratio > 1 + max(MIN_GAIN, tol)
        verb = "kept" if kept else "rejected"
        code = Why.ONE_RUN_GAIN if kept else Why.ONE_RUN_NO_GAIN
        ttt = replace(
            ttt,
            kept=kept,
            interval=None,
            why=code,
            reason=f"{verb}: the {ttt.before.seeds} seeds of each arm are one run (the same curve: the "
            f"script's seed could not be varied), so there is no spread to judge by; "
            f"{ratio:.2f}× sooner against a stated tolerance of {tol:.0%}",
        )
    cores = pairs.base[0].cores if pairs.base else None
    before = fair.ArmLoad(tuple(r.others_cores for r in pairs.base), cores)
    after = fair.ArmLoad(tuple(r.others_cores for r in pairs.runs), cores)
    slower = ttt.interval is not None and ttt.interval[1] < 1
    why = fair.contention_verdict(ratio, ttt.kept, slower, before, after, 1 + MIN_GAIN)
    if why is None:
        return _leaning(ttt)
    rerun = f" ({pairs.reruns} pair(s) already run again)" if pairs.reruns else ""
    said = f"inconclusive: {why}{rerun}; run it on a quieter machine"
    return replace(ttt, kept=False, reason=said, why=Why.CONTENDED), why


def _leaning(ttt: TimeToTarget) -> tuple[TimeToTarget, str | None]:
    """The A/B trials' lean rule (:func:`~advisors.experiments.pair_verdict.leans`), the same for the seeds: a
    change whose point estimate clears twice the bar's margin while its interval does not clear the bar leans
    towards a gain it cannot show — ``inconclusive``, not "no gain" (on llm.c fused AdamW read "rejected: 1.13×
    sooner [0.89, 1.80]" where its A/B read inconclusive 1.13× [0.97, 1.22])."""
    ratio, iv = ttt.ratio, ttt.interval
    if (
        ttt.kept
        or ratio is None
        or iv is None
        or not leans(ratio, 1 + MIN_GAIN)
        or iv[0] >= 1 + MIN_GAIN
    ):
        return ttt, None
    why = (
        f"the seeds lean towards a gain they cannot show: {ratio:.2f}× sooner clears {1 + 2 * MIN_GAIN:.2f}× but "
        f"its interval [{iv[0]:.2f}, {iv[1]:.2f}] does not clear {1 + MIN_GAIN:.2f}"
    )
    said = f"inconclusive: {why}; more seeds (--seeds) may show it"
    return replace(ttt, reason=said, why=Why.LEAN), why
