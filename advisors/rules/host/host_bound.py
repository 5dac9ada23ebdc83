"""HOST003 — the GPU idles while the host runs Python (or anything else) between its kernels."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation
from profilers.trace.python_idle import where


def _python_functions(f: Facts, min_share: float, top: int = 3) -> str:
    """ "train_step (train.py:42) 31% of the step, …" from the trace's Python frames, or "" when none."""
    if f.b is None or not len(f.b.python_idle) or not f.b.total_step_ns:
        return ""
    rows = f.b.python_idle.head(top)
    return ", ".join(
        f"{where(str(n))} {pct(ns / f.b.total_step_ns)} of the step"
        for n, ns in zip(rows["name"], rows["idle_ns"])
        if ns / f.b.total_step_ns >= min_share
    )


#: Host categories of a GPU step's idle time, in the breakdown's order, with how to say them.
_HOST_PARTS = (
    ("host_runtime", "CUDA runtime calls"),
    ("optimizer", "the optimizer's host ops"),
    ("backward", "backward's host ops"),
    ("forward", "forward's host ops"),
    ("other", "Python and other host work no operator covers"),
)


class HostBound(Rule):
    """GPU idle time that no loader wait and no collective covers is host time, wherever the host spends it:
    Python between operators, the host side of operators, runtime calls, time no event covers (``other``).
    Many tiny kernels are one way to get there (HOST001 says so when its pattern holds, and leads this finding
    then); a step that runs long Python (metrics, logging, data shuffling on the main thread, a slow custom
    op) between a few long kernels is another, and it is host-bound all the same.

    Severity: ``Facts.launch_idle`` — the GPU's idle share of the step not explained by the input pipeline or
    by collectives (the accounting's *host* region). Thresholds: ``min_idle_share`` (0.3) to speak (below it the
    device works over 70% of the step and its own rules speak first),
    ``high_idle_share`` (0.6) for full confidence.

    Fix: none is one keyword here: find the host code that holds the GPU idle (the largest host category is
    named; a trace recorded ``with_stack=True`` names the Python functions themselves, with file:line — up to
    three holding at least ``min_function_share`` (0.02) of the step idle, see
    :mod:`profilers.trace.python_idle`; otherwise py-spy or the trace's CPU timeline show which lines) and move it
    off the step, batch it, or run it every N steps; CUDA graphs only help when the idle is launch overhead
    (HOST001).
    """

    id, name, bottleneck = "HOST003", "host-bound", Bottleneck.HOST
    cause = "host_gaps"
    thresholds = {"min_idle_share": 0.3, "high_idle_share": 0.6, "min_function_share": 0.02}
    fix_id = None
    fires = (
        Example(
            "one step, GPU idle 58% while the host runs Python (no loader, no collectives)",
            lambda: observation(
                {"gpu_compute": 0.42, "other": 0.5, "forward": 0.08},
                step_ms=120,
                kernels={"matmul": 0.3, "elementwise": 0.12},
                kernels_per_step=40,
                median_kernel_us=900,
            ),
            fix=None,
            severity=0.58,
        ),
    )
    passes = (
        Example("busy GPU", lambda: observation({"gpu_compute": 0.9, "other": 0.1})),
        Example(
            "idle GPU waiting for the loader (data, not host)",
            lambda: observation({"gpu_compute": 0.3, "dataloader": 0.6, "other": 0.1}),
        ),
        Example("CPU run", lambda: observation({"forward": 0.5, "other": 0.5}, device="cpu")),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return (
            None
            if f.device == "gpu"
            else "no GPU timeline: a CPU run has no device for the host to starve"
        )

    def check(self, f: Facts) -> Finding | None:
        idle = f.launch_idle
        if idle < self.t["min_idle_share"]:
            return None
        parts = {label: f.shares.get(cat, 0.0) for cat, label in _HOST_PARTS}
        top = max(parts, key=parts.__getitem__)
        named = _python_functions(f, self.t["min_function_share"])
        where = (
            (
                f"the Python functions holding it idle, as the trace recorded them: {named}; move that work off "
                "the step or run it less often"
            )
            if named
            else "find that host code (py-spy, the trace's CPU timeline) and move it off the step or run it less often"
        )
        return self.finding(
            f,
            severity=idle,
            confidence=ramp(idle, self.t["min_idle_share"], self.t["high_idle_share"]),
            message=f"The GPU idles {pct(idle)} of the step while the host works (most in {top}, "
            f"{pct(parts[top])} of the step), not waiting for data or collectives: the step is host-bound; "
            f"{where}.",
            evidence={
                "gpu_busy_share": f.gpu_busy,
                "host_idle_share": idle,
                "dataloader_exposed_share": f.loader_exposed,
                "comm_orchestration_share": f.comm_orchestration,
                **{f"{cat}_share": f.shares.get(cat, 0.0) for cat, _ in _HOST_PARTS},
            },
        )
