"""MEM005 — a memory snapshot whose peak fills the device (or, with no device total, all it reserved)."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.rules.memory.capacity import capacity_stake
from advisors.synthetic import observation, snapshot_of
from profilers.trace.memory_snapshot import GIB, MemorySnapshot


class SnapshotPeak(Rule):
    """A ``torch.cuda.memory._dump_snapshot`` pickle: the peak of live allocations (replayed from the
    allocator's history) and the memory the caching allocator reserved from the device, against the device
    total. A snapshot has no step timing, so this is the only class it can speak for.

    - The history records an out-of-memory event: severity 1, confidence ``oom_confidence`` (0.95).
    - The device total is known (the user states it: ``analyze --device-memory-gib``, or the Upload page):
      reserved/total ramps like MEM001, severity ``near_stake`` (0.10) at ``near_share`` (0.90) up to
      ``full_stake`` (0.60) at ``full_share`` (0.98).
    - The total is unknown (snapshots do not record it): the rule stays silent. A peak alone never makes memory
      the binding bottleneck (the same 13 GiB fills a 16 GiB card and a sixth of an 80 GiB one); the analysis
      states the peak and asks for the device's size (:func:`advisors.analysis.value.snapshot_headline`).

    Thresholds: ``near_share``, ``full_share``, ``near_stake``, ``full_stake``, ``oom_confidence`` (defaults
    above; override them like any rule's).

    Evidence: peak live GiB, reserved GiB, the device total when known, and where the largest live-at-peak
    allocations were made (first frame outside torch).

    Fix: a smaller micro-batch with gradient accumulation (activations dominate most training peaks).
    """

    id, name, bottleneck = "MEM005", "snapshot-peak-memory", Bottleneck.MEMORY
    cause = "capacity"
    thresholds = {
        "near_share": 0.90,
        "full_share": 0.98,
        "near_stake": 0.10,
        "full_stake": 0.60,
        "oom_confidence": 0.95,
    }
    fix_id = "grad_accumulation"
    fires = (
        Example(
            "snapshot: 15.2 GiB reserved on a 16 GiB device",
            lambda: observation(snapshot=snapshot_of(14.8, 15.2), device_memory_gib=16.0),
            fix="grad_accumulation",
            severity=0.4125,
        ),
        Example(
            "snapshot with an out-of-memory event",
            lambda: observation(snapshot=snapshot_of(7.5, 7.9, 1)),
            fix="grad_accumulation",
            severity=1.0,
        ),
    )
    passes = (
        Example(
            "snapshot: 13.2 GiB reserved on an 80 GiB device",
            lambda: observation(snapshot=snapshot_of(12.97, 13.21), device_memory_gib=80.0),
        ),
        Example(
            "snapshot, device total unknown: peak 12.97 of 13.21 GiB reserved (the device size decides)",
            lambda: observation(snapshot=snapshot_of(12.97, 13.21)),
        ),
        Example(
            "snapshot, total unknown, peak only half of the reservation (fragmentation, not pressure)",
            lambda: observation(snapshot=snapshot_of(4.0, 8.0)),
        ),
        Example("a trace, no snapshot", lambda: observation({"gpu_compute": 0.9})),
    )

    def missing(self, f: Facts) -> str | None:
        if f.snapshot is None:
            return None if f.b is not None or f.run is not None else "no memory snapshot to read"
        if f.snapshot.peak_allocated_bytes is None and not f.device_memory_bytes:
            return "the snapshot has no allocation history (record_memory_history was off) and no device total"
        if not f.device_memory_bytes and not f.snapshot.oom_events:
            peak = f.snapshot.peak_allocated_bytes
            return (
                f"peak live {_gib(peak)} of {_gib(f.snapshot.reserved_bytes)} reserved, but a snapshot does not "
                "record its device's size: state it (--device-memory-gib, or the device memory field) to judge "
                "capacity"
            )
        return None

    def check(self, f: Facts) -> Finding | None:
        s = f.snapshot
        if s is None:
            return None
        if s.oom_events:
            return self._finding(
                f,
                s,
                1.0,
                self.t["oom_confidence"],
                f"The allocator ran out of memory {s.oom_events} time(s) in this snapshot's history "
                f"at {_gib(s.peak_allocated_bytes or s.reserved_bytes)} live",
            )
        total = f.device_memory_bytes
        if total:
            share = max(s.reserved_bytes, s.peak_allocated_bytes or 0) / total
            if share < self.t["near_share"]:
                return None
            return self._finding(
                f,
                s,
                capacity_stake(share, self.t),
                ramp(share, self.t["near_share"], self.t["full_share"]),
                f"Memory reaches {pct(share)} of the {_gib(total)} device "
                f"({_gib(s.reserved_bytes)} reserved)",
                share,
            )
        # No device total: the peak alone cannot say whether memory binds (13 GiB is full on a 16 GiB card and a
        # sixth of an 80 GiB one). The headline states the peak and asks for the device's size instead.
        return None

    def _finding(
        self,
        f: Facts,
        s: MemorySnapshot,
        severity: float,
        confidence: float,
        what: str,
        share: float | None = None,
    ) -> Finding:
        top = s.top_sites[0] if s.top_sites else None
        return self.finding(
            f,
            severity=severity,
            confidence=confidence,
            message=f"{what}: accumulate gradients over smaller micro-batches"
            + (f" (largest live at peak: {top.where}, {_gib(top.bytes)})." if top else "."),
            evidence={
                "peak_allocated_gib": _g(s.peak_allocated_bytes),
                "reserved_gib": _g(s.reserved_bytes),
                "device_total_gib": _g(f.device_memory_bytes),
                "share_of_device": share,
                "peak_share_of_reserved": s.peak_share_of_reserved,
                "oom_events": s.oom_events,
                "top_site": top.where if top else None,
                "top_site_gib": _g(top.bytes) if top else None,
            },
        )


def _g(n: int | None) -> float | None:
    return None if n is None else n / GIB


def _gib(n: float | None) -> str:
    return "an unknown amount" if n is None else f"{n / GIB:.2f} GiB"
