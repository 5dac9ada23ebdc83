"""DATA004 — host-to-device copies from pageable memory."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class PageableCopies(Rule):
    """Memcpy time from pageable (unpinned) host memory. Such copies go through a staging buffer, run at a
    fraction of the link bandwidth and cannot overlap compute (``non_blocking`` needs pinned memory).

    Severity: pageable copy time × ``pinned_saving`` (0.5, the share a pinned, asynchronous copy typically
    wins back). Thresholds: ``min_share`` (0.01) of step time in pageable copies; ``high_share`` (0.10).

    Fix: ``pin_memory=True`` on the DataLoader and ``.to(device, non_blocking=True)``.
    """

    id, name, bottleneck = "DATA004", "pageable-h2d-copies", Bottleneck.DATA
    cause = "h2d_copies"
    thresholds = {"min_share": 0.01, "high_share": 0.10, "pinned_saving": 0.5}
    fix_id = "pin_memory"
    fires = (
        Example(
            "4% of the step in pageable copies",
            lambda: observation({"gpu_compute": 0.7, "gpu_memcpy": 0.04}, pageable_copy=0.04),
            fix="pin_memory",
            severity=0.02,
        ),
    )
    passes = (
        Example(
            "copies already pinned",
            lambda: observation({"gpu_compute": 0.7, "gpu_memcpy": 0.04}, pinned_copy=0.04),
        ),
        Example("CPU run", lambda: observation({"forward": 0.9}, device="cpu")),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return None if f.device == "gpu" else "no GPU: there are no host-to-device copies to check"

    def check(self, f: Facts) -> Finding | None:
        if f.pageable_copy < self.t["min_share"]:
            return None
        return self.finding(
            f,
            severity=f.pageable_copy * self.t["pinned_saving"],
            at_stake=f.pageable_copy,
            confidence=ramp(f.pageable_copy, self.t["min_share"], self.t["high_share"]),
            message=f"{pct(f.pageable_copy)} of the step copies batches from pageable memory: set pin_memory=True "
            "and copy with non_blocking=True.",
            evidence={"pageable_copy_share": f.pageable_copy, "pinned_copy_share": f.pinned_copy},
        )
