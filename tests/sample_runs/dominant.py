"""Which kind of work a run's trace is dominated by, in the trace engine's own CPU categories.

On a CPU the operators are the compute, so ``forward`` + ``backward`` together are the model's compute;
``dataloader``, ``communication`` (exposed gloo all-reduce), ``optimizer`` and ``other`` (Python, idle) stand
alone. Shared by the real-run tests of the designed and the realistic workloads.
"""

from __future__ import annotations

from pathlib import Path

from profilers.trace.breakdown import Breakdown, breakdown
from profilers.trace.load import load_trace
from sample_runs import WORKLOADS

GROUPS = {
    "data": ("dataloader",),
    "compute": ("forward", "backward"),
    "communication": ("communication",),
    "optimizer": ("optimizer",),
    "other": ("other", "gpu_compute", "gpu_memcpy", "gpu_memset", "host_runtime"),
}

# The realistic workloads (``intended_bottleneck`` None): the group their tiny run's trace is dominated by.
# Forward+backward vs the runner-up, measured on 2 cores: benchmarks/results/test-lane-2026-11-23.md.
REALISTIC_DOMINANT = {"resnet_small": "compute", "gpt_small": "compute", "digits": "compute"}

DESIGNED = sorted(n for n, w in WORKLOADS.items() if w.intended_bottleneck is not None)
REALISTIC = sorted(n for n, w in WORKLOADS.items() if w.intended_bottleneck is None)


def expected_group(name: str) -> str:
    """What a registered workload's real run must show: its designed bottleneck, or for a realistic workload
    the group :data:`REALISTIC_DOMINANT` names (a new one without an entry fails here, naming what to add)."""
    designed = WORKLOADS[name].intended_bottleneck
    if designed is not None:
        return designed
    assert name in REALISTIC_DOMINANT, (
        f"{name} has no intended_bottleneck: measure which group dominates its "
        "tiny run and add it to REALISTIC_DOMINANT in tests/sample_runs/dominant.py"
    )
    return REALISTIC_DOMINANT[name]


def run_breakdown(run_dir: str | Path) -> Breakdown:
    """The breakdown of the trace a run exported (a stored run folder)."""
    return breakdown(load_trace(Path(run_dir)))


def grouped_shares(b: Breakdown) -> dict[str, float]:
    """Share of all step time per group of :data:`GROUPS`, largest first (rounded, for failure messages)."""
    shares = b.shares()
    grouped = {g: sum(shares[c] for c in cats) for g, cats in GROUPS.items()}
    return dict(sorted(((g, round(v, 3)) for g, v in grouped.items()), key=lambda kv: -kv[1]))


def assert_dominated_by(b: Breakdown, group: str, margin: float) -> dict[str, float]:
    """``group`` is the largest, at least ``margin`` × the runner-up; returns the shares for the record."""
    shares = grouped_shares(b)
    (top, top_share), (_, second) = list(shares.items())[:2]
    assert b.device == "cpu" and b.n_steps >= 1 and not b.steps_inferred, shares
    assert top == group and top_share >= margin * second, shares
    return shares


def assert_largest_category(b: Breakdown, category: str, margin: float) -> dict[str, float]:
    """``category`` is the largest of the breakdown's own categories (forward and backward apart), at least
    ``margin`` × the runner-up; returns the shares for the record."""
    shares = dict(sorted(((c, round(v, 3)) for c, v in b.shares().items()), key=lambda kv: -kv[1]))
    (top, top_share), (_, second) = list(shares.items())[:2]
    assert b.device == "cpu" and b.n_steps >= 1 and not b.steps_inferred, shares
    assert top == category and top_share >= margin * second, shares
    return shares
