"""The straggler of a job: one rule, decided here, that every surface and the advisor read.

A rank's *work* in a step is its step time minus the time it spent in communication (on a traced rank its exposed
communication; in an agent's summary its collectives' time): what it does itself, where the others, done earlier,
wait in their collectives for it. The candidate is the rank of most median work per step; its *lead* is that
median minus the median rank's.

The lead counts only when it stands out of the noise: ``lead > NOISE_MULTIPLE × noise``, where ``noise`` is the
largest of

- the **step-to-step noise**: the median over ranks of the interquartile range of a rank's work per step,
  measured when every rank has at least :data:`MIN_STEPS` steps;
- the **spread among the other ranks**: the interquartile range of their median work, measured when there are at
  least :data:`MIN_PEERS` other ranks (a rank that works as long as the next one is not what holds the job back);
- a **floor** of :data:`NOISE_FLOOR` of the median rank's step: steps of one program wander by that much from run
  to run even where a trace shows steadier ones, so a lead under ``2 × 2.5% = 5%`` of the step is never a
  straggler (and nothing under 5% of the step would be worth balancing).

With neither spread measurable (one or two steps per rank and fewer than four ranks) no rank is marked: a single
step can be slow for a reason of its own (a collection, a checkpoint), and one or two other ranks cannot say how
far ranks usually differ. A job of **one step** per rank is therefore judged by the spread among its ranks: eight
ranks of one step can still show one rank far beyond the rest, and two ranks of one step cannot.

:func:`find_straggler` returns the verdict (:class:`StragglerCall`) with its sentence (``reason``), which the Job
page, the Analysis page's Ranks tab, the report, ``analyze --json`` (``straggler``, ``straggler_reason``),
``compare``'s ranks and the advisor's COMM003 all take from it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

MIN_STEPS = 3  # steps per rank before a rank's step-to-step spread is measured
MIN_PEERS = 3  # other ranks before the spread among them is measured
NOISE_MULTIPLE = 2.0  # a lead beyond twice the noise counts
NOISE_FLOOR = 0.025  # the least noise assumed: this share of the median rank's step
VICTIM_SHARE = (
    0.5  # a rank waits on the straggler when it waits at least this share of its extra work longer
)


@dataclass(frozen=True)
class Straggler:
    """A marked straggler: its median work per step, the median rank's, and its excess work as a share of the
    median rank's step (``(work - median work) / median step``)."""

    rank: int
    work_ms: float
    median_work_ms: float
    excess_share: float


@dataclass(frozen=True)
class StragglerCall:
    """The rank of most work, its lead over the median rank, the noise it is judged against, and the verdict.
    ``rank`` is ``None`` with fewer than two ranks."""

    rank: int | None
    work_ms: float = 0.0
    median_work_ms: float = 0.0
    median_step_ms: float = 0.0
    steps: int = 0  # the fewest steps any rank has
    peers: int = 0  # the other ranks
    step_noise_ms: float | None = None  # None: too few steps to measure
    peer_spread_ms: float | None = None  # None: too few other ranks to measure

    @property
    def lead_ms(self) -> float:
        return self.work_ms - self.median_work_ms

    @property
    def excess_share(self) -> float:
        return self.lead_ms / self.median_step_ms if self.median_step_ms > 0 else 0.0

    @property
    def floor_ms(self) -> float:
        return NOISE_FLOOR * self.median_step_ms

    @property
    def noise_ms(self) -> float | None:
        """The noise the lead is judged against (see the module docs); ``None`` when no spread was measurable."""
        measured = [v for v in (self.step_noise_ms, self.peer_spread_ms) if v is not None]
        return max([*measured, self.floor_ms]) if measured else None

    @property
    def marked(self) -> bool:
        noise = self.noise_ms
        return self.rank is not None and noise is not None and self.lead_ms > NOISE_MULTIPLE * noise

    @property
    def straggler(self) -> Straggler | None:
        if not self.marked:
            return None
        assert self.rank is not None
        return Straggler(self.rank, self.work_ms, self.median_work_ms, self.excess_share)

    @property
    def reason(self) -> str:
        """One sentence: the straggler, or why no rank is marked."""
        if self.rank is None:
            return "One rank: there is no straggler to find."
        lead = (
            f"rank {self.rank} does the most work, {self.lead_ms:.2f} ms per step above the median rank "
            f"({self.excess_share:.1%} of the step)"
        )
        noise = self.noise_ms
        if self.marked:
            return (
                f"Straggler: rank {self.rank} works {self.lead_ms:.2f} ms per step more than the median rank "
                f"({self.excess_share:.1%} of the step), beyond twice the noise ({noise:.2f} ms: "
                f"{self._noise_words()})."
            )
        if noise is not None or self.lead_ms <= NOISE_MULTIPLE * self.floor_ms:
            said = (
                f"{(noise if noise is not None else self.floor_ms):.2f} ms: {self._noise_words()}"
            )
            return (
                f"{lead[0].upper()}{lead[1:]}, within twice the noise ({said}): no rank is marked."
            )
        return (
            f"{lead[0].upper()}{lead[1:]}, but {self._unmeasured()}: no rank is marked (at least {MIN_STEPS} "
            f"steps per rank, or {MIN_PEERS + 1} ranks, are needed)."
        )

    def _noise_words(self) -> str:
        """What set the noise, and what could not be measured."""
        noise = self.noise_ms
        if noise is not None and noise == self.step_noise_ms:
            said = f"the spread of a rank's work over its {self.steps} steps"
        elif noise is not None and noise == self.peer_spread_ms:
            said = f"the spread among the other {self.peers} ranks' work"
        else:
            said = f"{NOISE_FLOOR:.1%} of the step, the least taken for noise"
        if noise is None:
            return f"{said}; {self._unmeasured()}"
        if self.step_noise_ms is None:
            said += f"; with {self.steps} step{_s(self.steps)} per rank the step-to-step noise cannot be measured"
        return said

    def _unmeasured(self) -> str:
        return (
            f"with {self.steps} step{_s(self.steps)} per rank and {self.peers} other rank{_s(self.peers)} "
            "neither the step-to-step noise nor the spread among the ranks can be measured"
        )

    def to_json(self) -> str | None:
        """``straggler_reason`` of ``analyze --json``: the sentence, ``None`` for one rank."""
        return None if self.rank is None else self.reason


def find_straggler(ranks: Mapping[int, Sequence[tuple[float, float]]]) -> StragglerCall:
    """Judge a job: ``ranks`` maps each rank to its steps' ``(step ms, work ms)`` (see the module docs)."""
    rows = {
        int(r): [(float(s), float(w)) for s, w in steps] for r, steps in ranks.items() if len(steps)
    }
    if len(rows) < 2:
        return StragglerCall(None)
    work = {r: float(np.median([w for _, w in steps])) for r, steps in rows.items()}
    step = {r: float(np.median([s for s, _ in steps])) for r, steps in rows.items()}
    rank = max(
        work, key=lambda r: (work[r], -r)
    )  # ties: the lowest rank, as an argmax over ranks in order
    fewest = min(len(steps) for steps in rows.values())
    step_noise = (
        float(np.median([_iqr([w for _, w in steps]) for steps in rows.values()]))
        if fewest >= MIN_STEPS
        else None
    )
    peers = [w for r, w in work.items() if r != rank]
    return StragglerCall(
        rank=rank,
        work_ms=work[rank],
        median_work_ms=statistics.median(work.values()),
        median_step_ms=statistics.median(step.values()),
        steps=fewest,
        peers=len(peers),
        step_noise_ms=step_noise,
        peer_spread_ms=_iqr(peers) if len(peers) >= MIN_PEERS else None,
    )


def find_in_steps(per_step: pd.DataFrame) -> StragglerCall:
    """:func:`find_straggler` of a breakdown's per-step frame (``rank``, ``step_ns``, ``communication`` in ns): a
    rank's work is its step minus its exposed communication."""
    if per_step.empty:
        return StragglerCall(None)
    step = per_step["step_ns"].to_numpy(np.float64) / 1e6
    work = step - per_step["communication"].to_numpy(np.float64) / 1e6
    rows: dict[int, list[tuple[float, float]]] = {}
    for r, s, w in zip(per_step["rank"].tolist(), step.tolist(), work.tolist()):
        rows.setdefault(int(r), []).append((s, w))
    return find_straggler(rows)


def victims(s: Straggler, wait_ms: Mapping[int, float]) -> list[dict[str, Any]]:
    """The ranks that wait on the straggler: those whose waiting (``wait_ms``: median exposed communication, or
    collectives' time, per rank) exceeds the straggler's own by at least :data:`VICTIM_SHARE` of its extra work;
    longest wait first, each ``{"rank", "wait_ms"}`` (ms beyond the straggler's own)."""
    own = wait_ms.get(s.rank, 0.0)
    extra = s.work_ms - s.median_work_ms
    found = sorted(
        (
            (w - own, r)
            for r, w in wait_ms.items()
            if r != s.rank and extra > 0 and w - own >= VICTIM_SHARE * extra
        ),
        reverse=True,
    )
    return [{"rank": int(r), "wait_ms": round(float(w), 4)} for w, r in found]


def straggler_json(s: Straggler) -> dict[str, Any]:
    """The straggler as a job's views hold it (``job.straggler``; victims and extra work are added there)."""
    return {
        "culprit": s.rank,
        "work_ms": round(s.work_ms, 4),
        "median_work_ms": round(s.median_work_ms, 4),
        "excess_share": round(s.excess_share, 4),
    }


def _iqr(values: Sequence[float]) -> float:
    return float(np.percentile(values, 75) - np.percentile(values, 25))


def _s(n: int) -> str:
    return "" if n == 1 else "s"
