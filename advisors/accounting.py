"""Time at stake, counted once: findings claim step time the way the breakdown does.

The breakdown attributes every nanosecond of a step to one category, in a fixed priority. The advisor's
findings claim that same time, grouped into four *regions* of the step, so two findings of different classes
never both count the same microsecond:

========== ============================================================== ==========================
region     on a GPU rank (claimed in this order)                          on a CPU rank
========== ============================================================== ==========================
device     kernels, copies and sets outside exposed collectives           forward/backward/optimizer
collectives exposed collective kernels, plus the GPU-idle host gaps          collectives no operator
           around them (``Facts.comm_orchestration``)                     covers
loader     GPU idle inside DataLoader spans (loader waits)                DataLoader time (first)
host       the rest of the GPU's idle time (``Facts.launch_idle``)        time no operator covers
========== ============================================================== ==========================

So GPU idle covered by loader waits belongs to data, idle around exposed collectives to communication, and
only the rest is host. The regions add up to the step (shares of total step time, 0..1).

Each rule names its *cause* (:data:`CAUSES`): the time it looks at. Rules with the same cause see the same
time and become one finding (the most severe leads, the others are listed with their evidence); a
saturated device's cause contains the narrower device causes (GEMMs, pointwise kernels, CPU matmuls). Then,
most severe first, each finding claims its severity from its cause's region, at most what is left there.
Memory capacity, fragmentation and a loss plateau are not step time: they claim from no region and are not
capped (their severity is a risk or a run-time saving on the same 0..1 scale).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Mapping, Sequence

from advisors.facts import Facts
from advisors.verdict import OUTSIDE_STEP, Finding

REGIONS = ("device", "collectives", "loader", "host")

#: cause -> (region it claims from, or None for time outside the step; what the cause is).
CAUSES: Mapping[str, tuple[str | None, str]] = {
    "device_time": ("device", "the device is saturated: all of its work"),
    "gemm_time": ("device", "GEMM/convolution kernel time"),
    "pointwise_time": ("device", "elementwise and normalization kernel time"),
    "cpu_matmul": ("device", "host matmul operators on a CPU"),
    "attention_time": ("device", "attention written by hand inside one module"),
    "h2d_copies": ("device", "host-to-device copies from pageable memory"),
    "collectives": ("collectives", "collectives the step waits for"),
    "loader_wait": ("loader", "the step waiting for the next batch"),
    "host_gaps": ("host", "GPU idle while the host launches, syncs or allocates"),
    "capacity": (None, "memory close to (or past) capacity: a risk, not step time"),
    "fragmentation": (None, "reserved memory never used: headroom, not step time"),
    "plateau": (None, "steps after the loss stopped improving: run time, not step time"),
    "profiler_cost": (None, "the profiler's own memory: the measurement's cost, not the script's"),
}
#: A finding of the outer cause takes the findings of the inner causes into its group.
CONTAINS: Mapping[str, tuple[str, ...]] = {
    "device_time": ("gemm_time", "pointwise_time", "cpu_matmul", "attention_time")
}


def regions(f: Facts) -> dict[str, float]:
    """Each region's share of step time (see the module docs); all 0 without profiled steps.

    A run whose ranks wrote summaries at capture time and kept only some traces (``launch --trace-ranks``): its
    collectives region is at least the median rank's collective time in those summaries, because the traced
    rank may well be the straggler, the one rank that hardly waits in its collectives."""
    if not f.has_steps:
        return {r: 0.0 for r in REGIONS}
    s = f.shares
    if f.device == "gpu":
        out = {
            "device": f.device_work,
            "collectives": s.get("communication", 0.0) + f.comm_orchestration,
            "loader": s.get("dataloader", 0.0),
            "host": max(f.launch_idle, 0.0),
        }
    else:
        out = {
            "device": f.device_work,
            "collectives": s.get("communication", 0.0),
            "loader": s.get("dataloader", 0.0),
            "host": s.get("other", 0.0),
        }
    if len(f.summary_ranks) > f.n_ranks:
        shares = [r.comm_ms / r.step_ms for r in f.summary_ranks if r.step_ms > 0]
        if shares:
            out["collectives"] = max(out["collectives"], min(statistics.median(shares), 1.0))
    return out


def group(
    findings: Sequence[Finding], causes: Mapping[str, str], order: Mapping[str, int]
) -> list[Finding]:
    """One finding per cause: the most severe (ties: the earlier rule) leads and lists the others in
    ``related``; a contained cause joins its container's group when the container fired."""
    fired = {causes[f.rule] for f in findings}
    key = {c: outer for outer, inner in CONTAINS.items() if outer in fired for c in inner}
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(key.get(causes[f.rule], causes[f.rule]), []).append(f)
    out = []
    for members in groups.values():
        lead, *rest = sorted(members, key=lambda f: (-f.severity, order[f.rule]))
        out.append(replace(lead, related=tuple(rest)) if rest else lead)
    return out


def settle(
    groups: Sequence[Finding], causes: Mapping[str, str], facts: Facts, order: Mapping[str, int]
) -> list[Finding]:
    """Most severe first, each group claims its severity from its region, at most what is left there; the
    result is ranked by what each could claim. A group's own estimate is kept in ``estimate`` when capped."""
    left = regions(facts)
    out: list[Finding] = []
    for g in sorted(groups, key=lambda f: (-f.severity, -f.confidence, order[f.rule])):
        region = CAUSES[causes[g.rule]][0] or OUTSIDE_STEP
        claimed = g.severity if region == OUTSIDE_STEP else min(g.severity, left[region])
        if region != OUTSIDE_STEP:
            left[region] -= claimed
        out.append(
            replace(
                _capped(g, claimed, region),
                related=tuple(_capped(m, claimed, region) for m in g.related),
            )
        )
    return sorted(out, key=lambda f: (-f.severity, -f.confidence, order[f.rule]))


def _capped(f: Finding, most: float, region: str) -> Finding:
    """``f`` claiming at most ``most`` of ``region`` (its own estimate kept when that is lower)."""
    if f.severity <= most + 1e-9:
        return replace(f, region=region)
    return replace(f, severity=most, region=region, estimate=f.severity)
