"""COMM003 — one rank holds the others back."""

from __future__ import annotations

import statistics

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation
from profilers.jobs.straggler import NOISE_FLOOR, NOISE_MULTIPLE


class Straggler(Rule):
    """Across ranks, one does more work per step (step minus its exposed communication) than the median, beyond
    the noise; the others wait for it inside their collectives. Whether a rank is a straggler is decided once, by
    :mod:`profilers.jobs.straggler` (its lead beyond twice the noise, never under 5% of the step): this rule
    fires exactly when that marks one, so the Job page, the Ranks tab and ``compare`` name the rank it names.
    Each rank's exposed communication splits into *transfer* (the least any rank spends, roughly the wire time)
    and *wait* (the rest: time spent waiting for peers).

    Severity: the straggler's excess work as a share of the median step (``Straggler.excess_share``). Threshold:
    confidence ramps from the least lead that can be marked (``2 × NOISE_FLOOR``, 0.05) to ``high_excess_share``
    (0.25).

    Fix: none to patch — balance the work (shard sizes, sequence-length bucketing, uneven embedding tables).
    """

    id, name, bottleneck = "COMM003", "straggler-rank", Bottleneck.COMMUNICATION
    cause = "collectives"
    thresholds = {"high_excess_share": 0.25}
    fix_id = None
    fires = (
        Example(
            "rank 1 works 30% longer",
            lambda: observation(
                {"gpu_compute": 0.5},
                ranks=(0, 1, 2),
                rank_step_ms=(100, 100, 100),
                rank_exposed_ms=(40, 10, 40),
            ),
            fix=None,
            severity=0.3,
        ),
    )
    passes = (
        Example(
            "balanced ranks",
            lambda: observation({"gpu_compute": 0.5, "communication": 0.2}, ranks=(0, 1, 2)),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if f.has_steps and f.n_ranks < 2 and len(f.summary_ranks) < 2 and f.comm_total > 0:
            return "one rank in the trace: stragglers need the other ranks' traces too"
        return None

    def check(self, f: Facts) -> Finding | None:
        if f.b is None:
            return None
        # a --trace-ranks run: every rank's summary sees more ranks than the k traces do; its collective time
        # (on a waiting rank, mostly the wait) stands for the traces' exposed communication
        summarised = len(f.summary_ranks) > f.n_ranks
        s = f.summary_straggler if summarised else f.b.straggler
        if s is None:
            return None
        exposed = (
            [r.comm_ms for r in f.summary_ranks]
            if summarised
            else f.b.per_rank["exposed_comm_ms"].tolist()
        )
        transfer = float(min(exposed))
        wait = float(statistics.median(exposed)) - transfer
        n = len(f.summary_ranks)
        across = (
            f" across {'both' if n == 2 else f'all {n}'} ranks' summaries" if summarised else ""
        )
        evidence = {
            "straggler_rank": s.rank,
            "straggler_work_ms": s.work_ms,
            "median_work_ms": s.median_work_ms,
            "excess_share": s.excess_share,
            "median_wait_ms": wait,
            "transfer_ms": transfer,
        }
        return self.finding(
            f,
            severity=min(s.excess_share, 1.0),
            confidence=ramp(
                s.excess_share, NOISE_MULTIPLE * NOISE_FLOOR, self.t["high_excess_share"]
            ),
            message=f"Rank {s.rank} works {s.work_ms:.1f} ms per step against a median {s.median_work_ms:.1f} ms"
            f"{across}; the others wait for it ({pct(s.excess_share)} of the step): balance the work "
            "across ranks.",
            evidence={**evidence, "ranks_summarised": n} if summarised else evidence,
        )
