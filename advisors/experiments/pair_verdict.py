"""Which A/B pairs a verdict may rest on, and when it cannot rest on any: contention and pairs that disagree.

A pair is trial ``i`` of the baseline and of the patched arm, run back to back. On a shared machine (a CI
runner, a GPU box with other jobs, two cores with a neighbour) another program can take cores from one trial
of a pair and not the other; that pair then measures the neighbour. The rules:

- a pair whose trials other programs competed with (:data:`advisors.compare.contention.CONTENDED_CORES`)
  is left out while at least ``need`` clean pairs remain (more pairs are run first: :func:`needs_more_pairs`);
- with too few clean pairs, the verdict stands only when the contention could not have produced it, by the one
  rule ``compare`` follows too (:func:`advisors.compare.contention.holds_beyond_contention`): a neighbour that
  took ``o`` more of a trial's ``C`` cores than it took from the other trial of its pair slows that trial at most
  ``(C / (C − o))^1.5``. A gain stands when every contended pair's ratio, divided by what the neighbour could have
  taken from its baseline trial, still clears the bar; no gain stands when every ratio, multiplied by what it
  could have taken from the patched trial, still does not. Otherwise the verdict is **inconclusive**, and says
  who took how much;
- a gain needs every pair to agree: one pair that saw the patched run slower makes it inconclusive;
- pairs whose median clears the bar by twice its margin (:func:`leans`: 1.06x for a 1.03x bar) while one of them
  does not ("probably faster, not yet shown") get more pairs too, up to the policy's ``max_trials``; if the
  interval's low end still misses the bar while its point leans so, the verdict is **inconclusive** (not "no
  real gain": the trials lean towards a gain they cannot show).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from advisors.compare.contention import holds_beyond_contention
from advisors.experiments.results.outcome import Why
from advisors.experiments.trials import RunOutcome
from advisors.stats import RatioEstimate, Trial

MIN_CLEAN_PAIRS = (
    3  # at most this many clean pairs are asked for (fewer when the policy runs fewer trials)
)

RatioFn = Callable[[Sequence[Trial], Sequence[Trial]], RatioEstimate]


@dataclass(frozen=True)
class PairJudgement:
    """The ratio a verdict rests on, the pairs it used, and why it cannot decide (``None`` when it can)."""

    ratio: RatioEstimate
    used: tuple[int, ...]
    left_out: tuple[int, ...]
    inconclusive: str | None
    notes: tuple[str, ...] = ()
    inconclusive_why: Why | None = None  # ``inconclusive``'s code: contended or pairs_disagree

    def note_text(self) -> str:
        return "".join(f"; {n}" for n in self.notes)


def _others(o: RunOutcome) -> float:
    return o.load.others_cores if o.load is not None else 0.0


def _pairs(a: Sequence[RunOutcome], b: Sequence[RunOutcome]) -> list[int]:
    return [
        i for i in range(min(len(a), len(b))) if a[i].ok and b[i].ok and a[i].trial and b[i].trial
    ]


def _need(trials: int) -> int:
    return max(1, min(trials, MIN_CLEAN_PAIRS))


def needs_more_pairs(
    a: Sequence[RunOutcome], b: Sequence[RunOutcome], trials: int, edge: float
) -> bool:
    """True when the pairs so far cannot carry a verdict and another pair may: fewer than the clean pairs
    needed because other programs competed, or clean pairs that disagree about a gain above ``edge``."""
    pairs = _pairs(a, b)
    if len(pairs) < min(len(a), len(b)):
        return False  # a run failed: more pairs will not mend that
    clean = [i for i in pairs if not (a[i].contended or b[i].contended)]
    if len(clean) < len(pairs) and len(clean) < _need(trials):
        return True
    ratios = [_ratio(a[i], b[i]) for i in clean]
    disagree = any(r > edge for r in ratios) and any(r < 1.0 for r in ratios)
    leaning = (
        len(ratios) >= 2 and leans(sorted(ratios)[len(ratios) // 2], edge) and min(ratios) <= edge
    )
    return disagree or leaning


def leans(ratio: float, edge: float) -> bool:
    """Whether ``ratio`` is a gain of at least twice the bar's margin (``edge`` 1.03: above 1.06)."""
    return ratio > 1.0 + 2.0 * (edge - 1.0)


def _ratio(a: RunOutcome, b: RunOutcome) -> float:
    assert a.trial is not None and b.trial is not None
    return b.trial.throughput / a.trial.throughput


def judge_pairs(
    a: Sequence[RunOutcome], b: Sequence[RunOutcome], trials: int, edge: float, ratio_fn: RatioFn
) -> PairJudgement:
    """The ratio over the pairs a verdict may use, and whether it may decide (see the module's rules)."""
    pairs = _pairs(a, b)
    contended = [i for i in pairs if a[i].contended or b[i].contended]
    clean = [i for i in pairs if i not in contended]
    enough_clean = len(clean) >= _need(trials)
    used = clean if contended and enough_clean else pairs
    ratio = ratio_fn(
        [t for i in used if (t := a[i].trial) is not None],
        [t for i in used if (t := b[i].trial) is not None],
    )
    notes: list[str] = []
    left_out = tuple(contended) if contended and enough_clean else ()
    if left_out:
        notes.append(f"{len(left_out)} of {len(pairs)} pairs left out: {_who(a, b, left_out)}")
    gain = ratio.low > edge
    why: str | None = None
    code: Why | None = None
    if contended and not enough_clean:
        holds = _holds_beyond_contention(a, b, contended, gain, edge)
        if not holds:
            why = (
                f"{_who(a, b, contended)}; {len(clean)} of {len(pairs)} pairs ran uncontended where a "
                f"verdict needs {_need(trials)}, and the competition could explain the result"
            )
            code = Why.CONTENDED
        else:
            notes.append(
                f"{_who(a, b, contended)}, which cannot explain this verdict (each pair still "
                f"{'clears' if gain else 'misses'} {edge:.2f}x when the neighbour's share is taken out)"
            )
    if why is None and gain and ratio.pairs and ratio.pairs_faster < len(ratio.pairs):
        why = (
            f"pairs disagree: {ratio.pairs_faster} of {len(ratio.pairs)} saw the patched run faster "
            f"({', '.join(f'{r:.2f}x' for r in ratio.pairs)})"
        )
        code = Why.PAIRS_DISAGREE
    return PairJudgement(
        ratio=ratio,
        used=tuple(used),
        left_out=left_out,
        inconclusive=why,
        notes=tuple(notes),
        inconclusive_why=code,
    )


def _holds_beyond_contention(
    a: Sequence[RunOutcome],
    b: Sequence[RunOutcome],
    contended: Sequence[int],
    gain: bool,
    edge: float,
) -> bool:
    """Whether every contended pair keeps its side of ``edge`` once the neighbour's largest possible effect on
    it is taken out: a gain divided by what it could have cost the baseline, no gain multiplied by what it could
    have cost the patched run."""
    for i in contended:
        cores = next(
            (o.load.cores for o in (a[i], b[i]) if o.load is not None and o.load.cores), None
        )
        if not holds_beyond_contention(
            _ratio(a[i], b[i]), _others(a[i]), _others(b[i]), cores, edge, gain
        ):
            return False
    return True


def _who(a: Sequence[RunOutcome], b: Sequence[RunOutcome], pairs: Sequence[int]) -> str:
    """``other programs took 1.02 of 2 cores in the baseline's trial 3`` — the most competed trial of ``pairs``."""
    worst = max(
        (
            (_others(o), arm, i)
            for i in pairs
            for arm, o in (("baseline's", a[i]), ("patched", b[i]))
        ),
        key=lambda x: x[0],
    )
    o = a[worst[2]] if worst[1] == "baseline's" else b[worst[2]]
    taken = o.load.text() if o.load is not None else f"{worst[0]:.2f} cores"
    arm = "the baseline's" if worst[1] == "baseline's" else "the patched arm's"
    return f"other programs took {taken} in {arm} trial {worst[2] + 1}"
