"""COMM002 — collectives run serialised with compute instead of under it."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class LowOverlap(Rule):
    """Little of the collective time overlaps compute although there is compute to hide it under. DDP
    overlaps each gradient bucket's all-reduce with the rest of backward; when buckets are too large (the
    first all-reduce starts late) or the model issues collectives synchronously, they serialise.

    Severity: the part of exposed communication that existing compute could hide —
    ``min(exposed, compute share)``. Thresholds: ``min_comm_share`` (0.10) of step time in collectives;
    ``max_overlap`` (0.3) — overlap fraction below which the rule fires; ``min_hideable`` (0.05).

    Only for all-reduce (or collectives the trace does not name): buckets are DDP's, and cannot move an
    all-to-all or a sharded all-gather (COMM001 advises those).

    Fix: smaller DDP buckets so all-reduce starts earlier in backward.
    """

    id, name, bottleneck = "COMM002", "low-comm-overlap", Bottleneck.COMMUNICATION
    cause = "collectives"
    thresholds = {"min_comm_share": 0.10, "max_overlap": 0.3, "min_hideable": 0.05}
    fix_id = "ddp_bucket_size"
    fires = (
        Example(
            "all-reduce 21% of the step, none of it overlapped, 36% compute",
            lambda: observation({"gpu_compute": 0.36, "communication": 0.21}, comm_total=0.21),
            fix="ddp_bucket_size",
            severity=0.21,
        ),
    )
    passes = (
        Example(
            "overlapped collectives",
            lambda: observation(
                {"gpu_compute": 0.8, "communication": 0.03}, comm_total=0.3, comm_overlapped=0.27
            ),
        ),
        Example(
            "all-to-all, none overlapped: buckets cannot move it",
            lambda: observation(
                {"gpu_compute": 0.36, "communication": 0.21},
                comm_total=0.21,
                kernels={"all_to_all": 0.21},
            ),
        ),
        Example(
            "exposed, but no compute to hide under",
            lambda: observation({"gpu_compute": 0.02, "communication": 0.6}, comm_total=0.6),
        ),
    )

    def check(self, f: Facts) -> Finding | None:
        overlap = f.comm_overlap_fraction
        if overlap is None or f.comm_total < self.t["min_comm_share"]:
            return None
        if overlap >= self.t["max_overlap"] or f.comm_kind not in (None, "all_reduce"):
            return None
        compute = (
            f.shares.get("gpu_compute", 0.0)
            if f.device == "gpu"
            else sum(f.shares.get(c, 0.0) for c in ("forward", "backward"))
        )
        hideable = min(f.comm_exposed, compute)
        if hideable < self.t["min_hideable"]:
            return None
        return self.finding(
            f,
            severity=hideable,
            confidence=ramp(self.t["max_overlap"] - overlap, 0.0, self.t["max_overlap"]),
            message=f"Only {pct(overlap)} of collective time overlaps compute while {pct(hideable)} of the step "
            "could hide under it: use smaller DDP buckets so all-reduce starts during backward.",
            evidence={
                "comm_overlap_fraction": overlap,
                "comm_total_share": f.comm_total,
                "exposed_comm_share": f.comm_exposed,
                "hideable_share": hideable,
            },
        )
