"""HOST001 — the GPU waits for the CPU to launch work."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fit import first_fitting
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, run_facts
from profilers.run.run_config import RunConfig

_GRAPHS = RunConfig(workload="gpt_small", cuda_graphs=True)


class LaunchBound(Rule):
    """The GPU is mostly idle while the host dispatches many short kernels: per-op Python, dispatcher and
    launch overhead is longer than the kernels themselves, so the device finishes each one and waits.

    Severity: GPU-idle time not explained by the input pipeline nor by collectives (``Facts.launch_idle``).
    Thresholds: ``max_gpu_busy`` (0.5) — "mostly idle"; ``max_median_kernel_us`` (50) — "short kernels";
    ``min_kernels_per_step`` (5); ``high_idle_share`` (0.8) for full confidence.

    Fix: capture the step in a CUDA graph (``torch.compile(mode="reduce-overhead")``) or give each launch more
    work with a larger batch.
    """

    id, name, bottleneck = "HOST001", "launch-bound", Bottleneck.HOST
    cause = "host_gaps"
    thresholds = {"max_gpu_busy": 0.5, "max_median_kernel_us": 50.0, "min_kernels_per_step": 5.0,
                  "high_idle_share": 0.8}
    fix_id = "cuda_graphs"
    fires = (Example("small BERT: GPU busy 7%, 60 kernels of ~5 µs per step",
                     lambda: observation({"gpu_compute": 0.07, "forward": 0.36, "host_runtime": 0.09},
                                         kernels_per_step=60, median_kernel_us=4.6, step_ms=4.4),
                     fix="cuda_graphs", severity=0.93),
             Example("stored run with CUDA graphs on already: a larger batch instead",
                     lambda: observation({"gpu_compute": 0.07, "forward": 0.36, "host_runtime": 0.09},
                                         kernels_per_step=60, median_kernel_us=4.6, step_ms=4.4,
                                         run=run_facts(device="cuda", spec=_GRAPHS)),
                     fix="larger_batch", severity=0.93))
    passes = (Example("busy GPU", lambda: observation({"gpu_compute": 0.9}, median_kernel_us=5)),
              Example("idle GPU but long kernels: something else binds",
                      lambda: observation({"gpu_compute": 0.3, "dataloader": 0.6}, median_kernel_us=800)))

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return None if f.device == "gpu" else "no GPU events: launch overhead is measured against a GPU timeline"

    def check(self, f: Facts) -> Finding | None:
        if (f.gpu_busy or 0.0) > self.t["max_gpu_busy"]:
            return None
        if f.median_kernel_us > self.t["max_median_kernel_us"] or f.kernels_per_step < self.t["min_kernels_per_step"]:
            return None
        fix = first_fitting(f, "cuda_graphs", "larger_batch")
        return self.finding(
            f, severity=f.launch_idle,
            confidence=ramp(f.launch_idle, 1.0 - self.t["max_gpu_busy"], self.t["high_idle_share"]),
            message=f"The GPU is busy only {pct(f.gpu_busy or 0.0)} of the step while the host launches "
                    f"{f.kernels_per_step:.0f} kernels of ~{f.median_kernel_us:.0f} µs: "
                    + ("capture the step in a CUDA graph or use a larger batch." if fix == "cuda_graphs"
                       else "CUDA graphs are on already: give each launch more work with a larger batch."),
            evidence={"gpu_busy_share": f.gpu_busy, "launch_idle_share": f.launch_idle,
                      "kernels_per_step": f.kernels_per_step, "median_kernel_us": f.median_kernel_us,
                      "dataloader_exposed_share": f.loader_exposed, "comm_orchestration_share": f.comm_orchestration},
            fix_id=fix)
