"""MEM006 — a memory snapshot whose allocator reserved far more than was ever alive at once."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, snapshot_of
from profilers.trace.memory_snapshot import GIB


class SnapshotFragmentation(Rule):
    """Reserved memory against the replayed peak of live allocations in a ``_dump_snapshot`` pickle. The
    caching allocator keeps freed blocks for reuse; when blocks of one size cannot serve requests of another,
    it reserves new segments while old ones sit partly empty, so reserved memory outgrows anything the model
    ever held at once. That slack is memory a larger batch cannot use, and it is what runs out first.

    Fires when at most ``max_peak_share`` (0.75) of the reservation was ever alive at once and the unused part
    is at least ``min_slack_gib`` (1 GiB), unless the snapshot says ``expandable_segments`` is already on.
    Severity: the unused share of the reservation × ``stake`` (0.3): headroom, not step time. Confidence ramps
    from 0.25 to ``high_slack_share`` (0.5) unused.

    Thresholds: ``max_peak_share``, ``min_slack_gib``, ``high_slack_share``, ``stake`` (defaults above).

    Fix: ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (segments grow in place instead of multiplying).
    """

    id, name, bottleneck = "MEM006", "snapshot-fragmentation", Bottleneck.MEMORY
    cause = "fragmentation"
    thresholds = {
        "max_peak_share": 0.75,
        "min_slack_gib": 1.0,
        "high_slack_share": 0.5,
        "stake": 0.3,
    }
    fix_id = "expandable_segments"
    fires = (
        Example(
            "snapshot: 8 GiB reserved, never more than 4 GiB alive",
            lambda: observation(snapshot=snapshot_of(4.0, 8.0)),
            fix="expandable_segments",
            severity=0.15,
        ),
    )
    passes = (
        Example(
            "snapshot: peak fills 98% of the reservation",
            lambda: observation(snapshot=snapshot_of(12.97, 13.21)),
        ),
        Example(
            "snapshot: half empty but only 0.4 GiB of slack",
            lambda: observation(snapshot=snapshot_of(0.4, 0.8)),
        ),
        Example("a trace, no snapshot", lambda: observation({"gpu_compute": 0.9})),
    )

    def missing(self, f: Facts) -> str | None:
        s = f.snapshot
        if s is not None and s.peak_allocated_bytes is None:
            return "the snapshot has no allocation history (record_memory_history was off): no peak to compare"
        return None

    def check(self, f: Facts) -> Finding | None:
        s = f.snapshot
        if s is None or s.peak_share_of_reserved is None or s.expandable_segments is True:
            return None
        peak_share = s.peak_share_of_reserved
        slack = s.reserved_bytes - (s.peak_allocated_bytes or 0)
        if peak_share > self.t["max_peak_share"] or slack < self.t["min_slack_gib"] * GIB:
            return None
        unused = 1.0 - peak_share
        return self.finding(
            f,
            severity=unused * self.t["stake"],
            confidence=ramp(unused, 1.0 - self.t["max_peak_share"], self.t["high_slack_share"]),
            message=f"The allocator reserved {s.reserved_bytes / GIB:.2f} GiB but never held more than "
            f"{pct(peak_share)} of it at once ({slack / GIB:.2f} GiB idle in cached segments): turn on "
            "expandable segments so the reservation tracks what is alive.",
            evidence={
                "reserved_gib": s.reserved_bytes / GIB,
                "peak_allocated_gib": (s.peak_allocated_bytes or 0) / GIB,
                "peak_share_of_reserved": peak_share,
                "idle_reserved_gib": slack / GIB,
                "segments": s.segments,
                "expandable_segments": s.expandable_segments,
            },
        )
