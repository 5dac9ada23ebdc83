"""The regression gate: is NEW slower than BASE beyond a tolerance *and* beyond noise? And what moved?

**The statistic.** ``ratio = NEW's time per step / BASE's`` (> 1: NEW is slower), each the elapsed
time of the samples of :mod:`advisors.compare.step_samples` (a run's measured steps, a trace's
profiled steps per rank) over their count — the one speed of Stepwise
(:func:`stepwise_agent.steady.time_per_step`), the inverse of the samples/s ratio an Apply judges —
with a 95 % interval (:func:`advisors.stats.mean_ratio`: a block bootstrap of each side's steps,
fixed seed, so the same inputs always get the same verdict). A loader that stalls every few steps
slows the run by its stalls, whatever the typical (median) step does; the typical step is shown
beside the time per step, never in its place.

**The verdict.** ``regression`` when the ratio exceeds ``1 + max_slowdown`` *and* the change is shown beyond
noise, by either of two kinds of evidence (the verdict names which decided, :attr:`RegressionCheck.decided_by`):
the interval's lower bound exceeds 1 (``interval``), or categories of the breakdown moved beyond their own
step-to-step spread in (nearly) every step and carry the change between them (``categories``,
:mod:`advisors.compare.structure`: two outlier steps on one side widen the interval, not a category
that moved in every step). ``improvement`` in mirror image (ratio below ``1 / (1 + max_slowdown)``), so swapping
the sides swaps the two; ``same`` when the ratio is within the tolerance. Only a regression fails the gate.

**Inconclusive.** A ratio beyond the tolerance that no evidence shows beyond noise — the interval includes no
change and no category moved in every step, or a side has too few steps — or any verdict that competition for the
cores can explain, is neither a regression nor "the same": the verdict is ``inconclusive`` (exit code
:data:`EXIT_INCONCLUSIVE`), and the reason says what left it open and, from the steps there are, the smallest
slowdown the comparison could have told from noise (:func:`advisors.compare.structure.detectable_ratio`).

**Too few steps.** With fewer than :data:`MIN_STEPS` steps on a side there is no interval: resampling one or
two values says nothing about how much a step varies, so no difference can be told from noise. The verdict is
then ``same`` when the ratio is within the tolerance and ``inconclusive`` when it is not, never a regression or
an improvement, and its reason says so (a one-step trace against itself reads ``same`` with ratio 1; against
another one-step trace, the ratio is shown, unproven).

**What the interval cannot see.** One run per side shows the step-to-step noise, not the run-to-run noise
(process start, memory layout, other programs' load over a whole run). Two guards: the tolerance, and, for
stored runs with host telemetry, competition for the cores, judged by the one rule an A/B pair verdict follows
too (:mod:`advisors.compare.contention`): a neighbour that took ``o`` more of the machine's ``C`` cores during one
run slowed it at most ``(C / (C − o))^1.5`` (counting the cores left free when others were busy in both); a verdict stands when the ratio, with that taken out, keeps its side
of the tolerance (a regression still beyond it, "the same" still within it). Otherwise the verdict is
``inconclusive`` and the reason says who took how much (a re-run on a quieter machine settles it). Measured on a
busy 2-core machine in ``tests/advisors/compare/test_regression_runs.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from stepwise_agent import steady
from advisors.compare.contention import (
    CONTENDED_CORES,
    HostCpu,
    holds_beyond_contention,
    slowdown_bound,
)
from advisors.verdict import Bottleneck, Diagnosis
from advisors.compare.movers import Mover, Movers, movers
from advisors.stats import RatioEstimate, mean_ratio
from advisors.compare.step_samples import StepSamples
from advisors.compare.structure import (
    CategoryMove,
    StructureEvidence,
    detectable_ratio,
    structure_evidence,
)
from profilers.trace.breakdown import Breakdown

Verdict = Literal["regression", "improvement", "same", "inconclusive"]
Evidence = Literal["interval", "categories"]
DEFAULT_MAX_SLOWDOWN = 0.05
MIN_STEPS = 3
FEW_STEPS = (
    10  # with fewer steps on a side, a ``same`` also states the smallest change it could have seen
)
EXIT_REGRESSION, EXIT_INCONCLUSIVE = (
    1,
    3,
)  # 0: same or improvement; 2: bad input (the command line's)


@dataclass(frozen=True)
class Side:
    """One side of a comparison: its step samples, the advisor's binding bottleneck, its breakdown if any."""

    label: str
    samples: StepSamples
    bottleneck: Bottleneck
    headline: str | None  # the binding finding's sentence
    breakdown: Breakdown | None
    device: str | None
    cpu: HostCpu | None = (
        None  # a run's host CPU during its steady steps (None: a trace, or not recorded)
    )
    ranks: dict[str, Any] | None = (
        None  # several ranks: their count, straggler and its critical path (rank_views)
    )

    @property
    def step_time_ms(self) -> float:
        """The side's time per step: its steps' elapsed time over their count."""
        return float(np.mean(self.samples.ms))

    @property
    def typical_step_ms(self) -> float:
        """The side's typical step (the median), beside its time per step."""
        return float(np.median(self.samples.ms))

    @property
    def stalled_share(self) -> float:
        return steady.stalled_share(self.samples.ms) or 0.0

    @property
    def steps(self) -> int:
        return len(self.samples.ms)


@dataclass(frozen=True)
class RegressionCheck:
    """The verdict, the numbers it rests on and the reason in one paragraph. ``estimate`` is
    ``None`` when a side has fewer than :data:`MIN_STEPS` steps (``ratio`` is then the bare ratio of
    times per step). ``contended``: other programs' competition for the cores may explain the
    change, so it was not called. ``decided_by``: the evidence that showed a regression or an
    improvement beyond noise; ``structure``: the categories that moved in (nearly) every step;
    ``detectable``: the smallest ratio the interval could have shown."""

    verdict: Verdict
    ratio: float
    estimate: RatioEstimate | None
    max_slowdown: float
    reason: str
    base: Side
    new: Side
    movers: Movers
    notes: tuple[str, ...]
    contended: bool = False
    decided_by: tuple[Evidence, ...] = ()
    structure: StructureEvidence | None = None
    detectable: float | None = None

    @property
    def exit_code(self) -> int:
        """0 same or improvement, 1 a regression, 3 inconclusive (2, bad input, is the command line's)."""
        return {"regression": EXIT_REGRESSION, "inconclusive": EXIT_INCONCLUSIVE}.get(
            self.verdict, 0
        )


def side(
    label: str,
    samples: StepSamples,
    diagnosis: Diagnosis | None,
    breakdown: Breakdown | None,
    device: str | None = None,
    cpu: HostCpu | None = None,
    ranks: dict[str, Any] | None = None,
) -> Side:
    binding = diagnosis.binding if diagnosis is not None else None
    return Side(
        label=label,
        samples=samples,
        bottleneck=diagnosis.bottleneck if diagnosis else Bottleneck.NONE,
        headline=binding.message if binding is not None else None,
        breakdown=breakdown,
        device=device or (breakdown.device if breakdown is not None else None),
        cpu=cpu,
        ranks=ranks,
    )


def rank_views(job: dict[str, Any] | None) -> dict[str, Any] | None:
    """A side's ranks as ``compare`` shows them, from ``analyze``'s ``job`` (a folder's map and reduce, or a
    run's agent summaries): how many, which kept a trace, the straggler (marked by :mod:`profilers.jobs.straggler`,
    with its sentence, or why none is) and the critical path by kind. None for a single rank."""
    if not job or len(job.get("ranks", ())) < 2:
        return None
    s, cp = job.get("straggler"), job.get("critical_path")
    return {
        "ranks": len(job["ranks"]),
        "traced_ranks": job.get("traced_ranks"),
        "straggler": None
        if s is None
        else {k: s[k] for k in ("culprit", "work_ms", "median_work_ms")},
        "straggler_reason": job.get("straggler_reason"),
        "critical_path": None
        if not cp or not cp.get("available")
        else {
            "rank": cp["rank"],
            "step": cp["step"],
            "total_ms": cp["total_ms"],
            "by_kind": {k["kind"]: k["ms"] for k in cp["by_kind"]},
        },
    }


def check(base: Side, new: Side, max_slowdown: float = DEFAULT_MAX_SLOWDOWN) -> RegressionCheck:
    """Judge NEW against BASE (see the module docs)."""
    if not 0 <= max_slowdown < 10:
        raise ValueError(f"max_slowdown is a fraction (0.05 for 5%), got {max_slowdown}")
    ratio = new.step_time_ms / base.step_time_ms
    enough = min(base.steps, new.steps) >= MIN_STEPS
    est = mean_ratio(base.samples.ms, new.samples.ms) if enough else None
    beyond = ratio > 1 + max_slowdown or ratio < 1 / (1 + max_slowdown)
    contended = not _stands_beyond_contention(base.cpu, new.cpu, 1 / ratio, max_slowdown)
    structure = (
        structure_evidence(
            base.breakdown, new.breakdown, base.step_time_ms, new.step_time_ms, max_slowdown
        )
        if enough
        else None
    )
    detectable = detectable_ratio(base.samples.ms, new.samples.ms) if enough else None
    decided: tuple[Evidence, ...] = ()
    if contended:
        verdict: Verdict = "inconclusive"
    elif not beyond:
        verdict = "same"
    elif est is None:
        verdict = "inconclusive"
    else:
        shown = est.low > 1 if ratio > 1 else est.high < 1
        by: list[Evidence] = ["interval"] if shown else []
        if structure is not None and structure.decisive:
            by.append("categories")
        decided = tuple(by)
        verdict = ("regression" if ratio > 1 else "improvement") if decided else "inconclusive"
    moved = movers(base.breakdown, new.breakdown)
    why = _Why(
        verdict,
        ratio,
        est,
        max_slowdown,
        base,
        new,
        moved,
        contended,
        decided,
        structure,
        detectable,
    )
    return RegressionCheck(
        verdict=verdict,
        ratio=ratio,
        estimate=est,
        max_slowdown=max_slowdown,
        reason=_reason(why),
        base=base,
        new=new,
        movers=moved,
        notes=_notes(base, new, contended),
        contended=contended,
        decided_by=decided,
        structure=structure,
        detectable=detectable,
    )


def _stands_beyond_contention(
    base: HostCpu | None, new: HostCpu | None, speedup: float, tol: float
) -> bool:
    """Whether the verdict the ``speedup`` (NEW over BASE, > 1 faster) reads — an improvement beyond ``1 + tol``,
    a regression beyond ``1 / (1 + tol)``, "the same" between — stands once other programs' largest possible
    effect on either run is taken out (:func:`advisors.compare.contention.holds_beyond_contention`, the rule of the
    A/B pairs too). Without both runs' host figures nothing is suspected."""
    if base is None or new is None:
        return True
    up, down = 1 + tol, 1 / (1 + tol)

    def holds(edge: float, faster: bool) -> bool:
        return holds_beyond_contention(
            speedup, base.others, new.others, base.cores or new.cores, edge, faster, apart=True
        )

    if speedup > up:
        return holds(up, True)
    if speedup < down:
        return holds(down, False)
    return holds(down, True) and holds(up, False)


def _neighbour(base: HostCpu | None, new: HostCpu | None) -> tuple[str, float] | None:
    """Who other programs took more cores from (``"NEW"``/``"BASE"``) and the most that could slow it, when more
    than the telemetry's wander."""
    if base is None or new is None:
        return None
    busier, o, then = (
        ("NEW", new.others, base.others)
        if new.others >= base.others
        else ("BASE", base.others, new.others)
    )
    if (
        then >= CONTENDED_CORES
    ):  # neighbours during both runs: each bounded on its own (contention.speedup_range)
        then = 0.0
    bound = slowdown_bound(o, then, base.cores or new.cores)
    return (busier, bound) if bound > 1 else None


def _cores_text(base: HostCpu, new: HostCpu) -> str:
    return (
        f"other programs used {new.others:.2f} of the machine's {new.cores} cores during NEW and "
        f"{base.others:.2f} during BASE"
    )


@dataclass(frozen=True)
class _Why:
    """What :func:`_reason` puts in words."""

    verdict: Verdict
    ratio: float
    est: RatioEstimate | None
    tol: float
    base: Side
    new: Side
    moved: Movers
    contended: bool
    decided: tuple[Evidence, ...]
    structure: StructureEvidence | None
    detectable: float | None


def _reason(w: _Why) -> str:
    ratio, est, tol, base, new = w.ratio, w.est, w.tol, w.base, w.new
    change = _change(ratio)
    times = f"{new.step_time_ms:.4g} ms vs {base.step_time_ms:.4g} ms"
    if est is None and w.contended:
        return _contended_reason(w, times)
    if est is None:
        few = (
            f"BASE has {base.steps} step{_s(base.steps)} and NEW {new.steps}: at least {MIN_STEPS} per side are "
            "needed to tell a change from noise"
        )
        if w.verdict == "same":
            return (
                f"NEW's time per step is within the {tol:.0%} tolerance of BASE's ({times}; ratio {ratio:.3f}). "
                f"{few}."
            )
        return (
            f"NEW's time per step {change} BASE's ({times}), but {few}, so this cannot prove a "
            "regression or an improvement. Profile more steps."
        )
    interval = f"{100 * est.level:.0f}% interval of the ratio {est.low:.3f}-{est.high:.3f}"
    if w.contended:
        return _contended_reason(w, f"{times}; {interval}")
    if w.verdict == "same":
        within = (
            f"NEW's time per step is within the {tol:.0%} tolerance of BASE's ({times}; ratio {ratio:.3f}, "
            f"{interval})."
        )
        if min(base.steps, new.steps) < FEW_STEPS and w.detectable is not None:
            within += f" {_detectable(w.detectable, base, new)}"
        return within
    if w.verdict != "inconclusive":
        return (
            f"NEW's time per step {change} BASE's ({times}; {interval}): beyond the {tol:.0%} tolerance and "
            f"beyond noise, shown by {_decided(w)}.{_largest(w)}"
        )
    tail = f" {_detectable(w.detectable, base, new)}" if w.detectable is not None else ""
    return (
        f"NEW's time per step {change} BASE's ({times}), beyond the {tol:.0%} tolerance, but the "
        f"{interval} includes no change and no category moved beyond its step-to-step spread in nearly every "
        f"step: not shown beyond the noise between their steps.{tail} Profile more steps, or re-run both."
    )


def _contended_reason(w: _Why, figures: str) -> str:
    """Why the competition for the cores leaves the verdict open: who took how much, and the most it explains."""
    base, new = w.base.cpu, w.new.cpu
    assert base is not None and new is not None
    busier, bound = _neighbour(base, new) or ("NEW", 1.0)
    within = 1 / (1 + w.tol) <= w.ratio <= 1 + w.tol
    said = (
        f"NEW's time per step is within the {w.tol:.0%} tolerance of BASE's ({figures})"
        if within
        else f"NEW's time per step {_change(w.ratio)} BASE's ({figures})"
    )
    hides = "could hide a change beyond the tolerance" if within else "could explain this change"
    return (
        f"{said}, but {_cores_text(base, new)}: a run that keeps that few of the cores slows down by up to "
        f"{bound:.2f}x, which {hides}, so the change cannot be told from the competition. Re-run on a quieter "
        "machine to settle it."
    )


def _decided(w: _Why) -> str:
    said = []
    if "interval" in w.decided:
        said.append("the interval of the times per step")
    if "categories" in w.decided and w.structure is not None:
        said.append(_moves_text(w.structure.moves))
    return " and by ".join(said)


def _moves_text(moves: tuple[CategoryMove, ...]) -> str:
    return "; ".join(
        f"{m.name.replace('_', ' ')}'s median {m.delta_ms:+.4g} ms per step in {m.steps_moved} of "
        f"{m.steps} steps, beyond its step-to-step spread of {m.spread_ms:.3g} ms"
        for m in moves
    )


def _detectable(ratio: float, base: Side, new: Side) -> str:
    if ratio == float("inf"):
        return "With these steps no change could be told from their noise."
    return (
        f"With {base.steps} and {new.steps} steps, the smallest slowdown the interval could tell "
        f"from their noise is about {ratio - 1:.0%}."
    )


def _change(ratio: float) -> str:
    if ratio >= 1:
        return f"takes {ratio - 1:.1%} longer than"
    return f"takes {1 - ratio:.1%} less time than"


def _largest(w: _Why) -> str:
    """The category that moved most, unless the evidence above already named it with its median per step: one
    figure per category in a sentence (a walk read "−58.75 ms" and "−58.08 ms" for the same dataloader)."""
    m = w.moved.largest
    if m is None:
        return ""
    if (
        "categories" in w.decided
        and w.structure is not None
        and any(c.name == m.name for c in w.structure.moves)
    ):
        return ""
    return f" The category that moved most: {m.name.replace('_', ' ')} ({m.delta_ms:+.4g} ms per step on average)."


def _notes(base: Side, new: Side, contended: bool = False) -> tuple[str, ...]:
    out = []
    if base.samples.kind != new.samples.kind:
        out.append(
            f"BASE is a {base.samples.kind} and NEW a {new.samples.kind}: their steps are measured "
            "differently (a run's wall-clock steps, a trace's profiled steps)"
        )
    if base.device and new.device and base.device != new.device:
        out.append(f"BASE ran on {base.device} and NEW on {new.device}")
    neighbour = _neighbour(base.cpu, new.cpu)
    if neighbour is not None and not contended and base.cpu is not None and new.cpu is not None:
        out.append(
            f"{_cores_text(base.cpu, new.cpu)}, which cannot explain this verdict: the cores they left "
            f"slow {neighbour[0]} by at most {neighbour[1]:.2f}x"
        )
    missing = [n for n, s in (("BASE", base), ("NEW", new)) if s.breakdown is None]
    if missing:
        out.append(
            f"{' and '.join(missing)} left no trace: the categories, kernels and operators that moved "
            "need a trace on both sides"
        )
    return tuple(out)


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def check_json(c: RegressionCheck) -> dict[str, Any]:
    """The ``compare --json`` document (plain types, stable field names: a contract like ``analyze --json``)."""
    est = c.estimate
    return {
        "verdict": c.verdict,
        "ratio": round(c.ratio, 4),
        "interval": None if est is None else [round(est.low, 4), round(est.high, 4)],
        "level": None if est is None else est.level,
        "max_slowdown": c.max_slowdown,
        "reason": c.reason,
        "base": _side_json(c.base),
        "new": _side_json(c.new),
        "bottleneck": {
            "base": c.base.bottleneck.value,
            "new": c.new.bottleneck.value,
            "changed": c.base.bottleneck != c.new.bottleneck,
        },
        "contention": {
            "suspected": c.contended,
            "base": _cpu_json(c.base.cpu),
            "new": _cpu_json(c.new.cpu),
        },
        "evidence": {
            "decided_by": list(c.decided_by),
            "categories": [] if c.structure is None else [_move_json(m) for m in c.structure.moves],
            "detectable_ratio": None
            if c.detectable is None or c.detectable == float("inf")
            else round(c.detectable, 4),
        },
        "movers": {
            "categories": [_mover_json(m) for m in c.movers.categories],
            "kernels": [_mover_json(m) for m in c.movers.kernels],
            "operators": [_mover_json(m) for m in c.movers.operators],
        },
        "notes": list(c.notes),
        "ranks": {"base": c.base.ranks, "new": c.new.ranks},
    }


def _side_json(s: Side) -> dict[str, Any]:
    return {
        "label": s.label,
        "kind": s.samples.kind,
        "step_time_ms": round(s.step_time_ms, 4),
        "steps": s.steps,
        "typical_step_ms": round(s.typical_step_ms, 4),
        "stalled_share": round(s.stalled_share, 4),
        "sampled": s.samples.what,
        "device": s.device,
        "bottleneck": s.bottleneck.value,
        "headline": s.headline,
    }


def _cpu_json(cpu: HostCpu | None) -> dict[str, Any] | None:
    if cpu is None:
        return None
    return {
        "cores": cpu.cores,
        "busy_cores": round(cpu.busy, 3),
        "process_cores": round(cpu.ours, 3),
        "other_cores": round(cpu.others, 3),
    }


def _move_json(m: CategoryMove) -> dict[str, Any]:
    return {
        "name": m.name,
        "base_ms": round(m.base_ms, 4),
        "new_ms": round(m.new_ms, 4),
        "delta_ms": round(m.delta_ms, 4),
        "spread_ms": round(m.spread_ms, 4),
        "steps_moved": m.steps_moved,
        "steps": m.steps,
    }


def _mover_json(m: Mover) -> dict[str, Any]:
    return {
        "name": m.name,
        "base_ms": round(m.base_ms, 4),
        "new_ms": round(m.new_ms, 4),
        "delta_ms": round(m.delta_ms, 4),
    }
