"""COMM003 — one rank holds the others back."""

from __future__ import annotations

import statistics

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class Straggler(Rule):
    """Across ranks, one does more work per step (step minus its exposed communication) than the median; the
    others wait for it inside their collectives. Each rank's exposed communication splits into *transfer* (the
    least any rank spends, roughly the wire time) and *wait* (the rest: time spent waiting for peers).

    Severity: the straggler's excess work as a share of the median step (``Straggler.excess_share`` of the
    breakdown). Thresholds: ``min_excess_share`` (0.05); ``high_excess_share`` (0.25).

    Fix: none to patch — balance the work (shard sizes, sequence-length bucketing, uneven embedding tables).
    """

    id, name, bottleneck = "COMM003", "straggler-rank", Bottleneck.COMMUNICATION
    cause = "collectives"
    thresholds = {"min_excess_share": 0.05, "high_excess_share": 0.25}
    fix_id = None
    fires = (Example("rank 1 works 30% longer",
                     lambda: observation({"gpu_compute": 0.5}, ranks=(0, 1, 2), rank_step_ms=(100, 100, 100),
                                         rank_exposed_ms=(40, 10, 40)), fix=None, severity=0.3),)
    passes = (Example("balanced ranks", lambda: observation({"gpu_compute": 0.5, "communication": 0.2},
                                                            ranks=(0, 1, 2))),)

    def missing(self, f: Facts) -> str | None:
        if f.has_steps and f.n_ranks < 2 and len(f.summary_ranks) < 2 and f.comm_total > 0:
            return "one rank in the trace: stragglers need the other ranks' traces too"
        return None

    def check(self, f: Facts) -> Finding | None:
        if f.b is None:
            return None
        if len(f.summary_ranks) > f.n_ranks:  # every rank's summary sees more ranks than the k traces do
            return self._from_summaries(f)
        s = f.b.straggler
        if s is None or s.excess_share < self.t["min_excess_share"]:
            return None
        exposed = f.b.per_rank["exposed_comm_ms"]
        transfer = float(exposed.min())
        wait = float(exposed.median()) - transfer
        return self.finding(
            f, severity=min(s.excess_share, 1.0),
            confidence=ramp(s.excess_share, self.t["min_excess_share"], self.t["high_excess_share"]),
            message=f"Rank {s.rank} works {s.work_ms:.1f} ms per step against a median {s.median_work_ms:.1f} ms; "
                    f"the others wait for it ({pct(s.excess_share)} of the step): balance the work across ranks.",
            evidence={"straggler_rank": s.rank, "straggler_work_ms": s.work_ms, "median_work_ms": s.median_work_ms,
                      "excess_share": s.excess_share, "median_wait_ms": wait, "transfer_ms": transfer})

    def _from_summaries(self, f: Facts) -> Finding | None:
        """The same judgement from the summaries every rank wrote at capture time (a ``--trace-ranks`` run): work
        is the step minus the rank's collective time, the wait the collective time beyond the least any rank
        spends in them."""
        ranks = f.summary_ranks
        culprit = max(ranks, key=lambda r: r.work_ms)
        median_work = statistics.median(r.work_ms for r in ranks)
        median_step = statistics.median(r.step_ms for r in ranks) or 1.0
        excess = (culprit.work_ms - median_work) / median_step
        if excess < self.t["min_excess_share"]:
            return None
        transfer = min(r.comm_ms for r in ranks)
        wait = statistics.median(r.comm_ms for r in ranks) - transfer
        return self.finding(
            f, severity=min(excess, 1.0),
            confidence=ramp(excess, self.t["min_excess_share"], self.t["high_excess_share"]),
            message=f"Rank {culprit.rank} works {culprit.work_ms:.1f} ms per step against a median "
                    f"{median_work:.1f} ms across {'both' if len(ranks) == 2 else f'all {len(ranks)}'} ranks' "
                    "summaries; the others wait for it "
                    f"({pct(excess)} of the step): balance the work across ranks.",
            evidence={"straggler_rank": culprit.rank, "straggler_work_ms": culprit.work_ms,
                      "median_work_ms": median_work, "excess_share": excess, "median_wait_ms": wait,
                      "transfer_ms": transfer, "ranks_summarised": len(ranks)})
