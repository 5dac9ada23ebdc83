"""HOST001 — the GPU waits for the CPU to launch work."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fixes import first_fitting
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, run_facts
from profilers.run.run_config import RunConfig

_GRAPHS = RunConfig(workload="gpt_small", cuda_graphs=True)
_SHORT_GEMMS = {"gpu_compute": 0.44, "forward": 0.3, "backward": 0.2, "optimizer": 0.05}
#: a 139-ms step of long fp32 convolutions: GPU busy 68%, 32% idle, most launches tiny, the work
#: in long kernels
_BIG_CONVS = {
    "gpu_compute": 0.66,
    "gpu_memcpy": 0.02,
    "forward": 0.12,
    "host_runtime": 0.08,
    "optimizer": 0.05,
    "backward": 0.02,
}


class LaunchBound(Rule):
    """The GPU idles while the host dispatches many short kernels: each launch's host cost (Python, the
    dispatcher, the runtime call) is longer than the kernel it launches, so the device finishes each one and
    waits for the next. That is the host-bound step CUDA graphs fix: the whole step's kernels are captured
    once and replayed with one launch (on an H100 the host-bound resnet_small went from 8.52 to 4.58 ms a step,
    1.86×, ``benchmarks/results/gpu-2026-11-26-h100.md``).

    Launches, not other host work, are told apart by the GPU's host-held idle time *per kernel
    launched* (``Facts.idle_per_launch_us``): tens of µs is one launch's own cost wherever the host
    spends it (bert-small on an H100, its Python recorded by the profiler: 69 µs). More per launch
    is still the launches when the host spends most of that idle on the launch path
    (``Facts.launch_path_share``: inside operators and runtime calls — an old PyTorch or a slow host
    dispatching a small model's ops, first launches loading their kernels); spent mostly in Python
    no operator covers, it is host work between the kernels (HOST003 says that, and it has no
    CUDA-graph fix).

    And the GPU's work must be made of short launches (``Facts.short_kernel_share``: kernel time in
    kernels no longer than the step's time per launch): where long kernels (a CNN's fp32
    convolutions) carry most of it, the host runs ahead while they run, the idle gathers in a few
    stretches of tiny kernels, and the step is bound by its long kernels, not by launching: their
    own rules speak (mixed precision, say), and HOST003 names the host time. With no kernel table
    (a summary's), the median kernel is weighed against the step's time per launch instead.

    Severity: that idle time (``Facts.launch_idle``: the GPU idle not explained by the input
    pipeline nor by collectives); the fix's own bound is all of it vanishing, the kernels then
    running back to back (:mod:`advisors.bounds`).

    Thresholds: ``min_idle_share`` (0.3) — the host holds the GPU idle that much of the step
    (HOST003's floor: the same time); ``max_idle_per_launch_us`` (100) — up to this, the idle per
    launch is a launch's cost; ``min_launch_path_share`` (0.5) of the idle on the launch path for
    more per launch; ``min_short_kernel_share`` (0.5) of kernel time in short launches;
    ``min_kernels_per_step`` (5); ``high_idle_share`` (0.6) for full confidence.

    Fix: capture the step in CUDA graphs — ``torch.compile(model, mode="reduce-overhead")`` — or, when the run
    does that already, give each launch more work with a larger batch.
    """

    id, name, bottleneck = "HOST001", "launch-bound", Bottleneck.HOST
    cause = "host_gaps"
    thresholds = {
        "min_idle_share": 0.3,
        "high_idle_share": 0.6,
        "max_idle_per_launch_us": 100.0,
        "min_launch_path_share": 0.5,
        "min_short_kernel_share": 0.5,
        "min_kernels_per_step": 5.0,
    }
    fix_id = "cuda_graphs"
    fires = (
        Example(
            "small BERT: GPU busy 7%, 60 kernels of ~5 µs per step",
            lambda: observation(
                {"gpu_compute": 0.07, "forward": 0.36, "host_runtime": 0.09},
                kernels={"matmul": 0.05, "elementwise": 0.02},
                kernels_per_step=60,
                median_kernel_us=4.6,
                step_ms=4.4,
            ),
            fix="cuda_graphs",
            severity=0.93,
        ),
        Example(
            "many short GEMMs: GPU busy 44%, host operators in the gaps, 300 launches in a 10 ms step",
            lambda: observation(
                _SHORT_GEMMS,
                kernels={"matmul": 0.4, "elementwise": 0.04},
                kernels_per_step=300,
                median_kernel_us=4,
                step_ms=10,
            ),
            fix="cuda_graphs",
            severity=0.56,
        ),
        Example(
            "GPU busy 60%, 400 kernels of ~60 µs, 40 µs idle per launch: still the launches",
            lambda: observation(
                {"gpu_compute": 0.6, "forward": 0.3},
                kernels={"matmul": 0.6},
                kernels_per_step=400,
                median_kernel_us=60,
                step_ms=40,
            ),
            fix="cuda_graphs",
            severity=0.4,
        ),
        Example(
            "small GEMMs on a slow host: GPU busy 10%, 10 kernels of ~8–30 µs in a 2 ms "
            "step, 180 µs idle per launch, two thirds of it in operators and runtime "
            "calls",
            lambda: observation(
                {"gpu_compute": 0.1, "forward": 0.5, "host_runtime": 0.1},
                kernels={"matmul": 0.08, "elementwise": 0.02},
                kernels_per_step=10,
                median_kernel_us=8,
                step_ms=2,
            ),
            fix="cuda_graphs",
            severity=0.9,
        ),
        Example(
            "stored run with CUDA graphs on already: a larger batch instead",
            lambda: observation(
                {"gpu_compute": 0.07, "forward": 0.36, "host_runtime": 0.09},
                kernels={"matmul": 0.05, "elementwise": 0.02},
                kernels_per_step=60,
                median_kernel_us=4.6,
                step_ms=4.4,
                run=run_facts(device="cuda", spec=_GRAPHS),
            ),
            fix="larger_batch",
            severity=0.93,
        ),
    )
    passes = (
        Example("busy GPU", lambda: observation({"gpu_compute": 0.9}, median_kernel_us=5)),
        Example(
            "idle GPU but long kernels: something else binds",
            lambda: observation({"gpu_compute": 0.3, "dataloader": 0.6}, median_kernel_us=800),
        ),
        Example(
            "GPU idle 58% while the host runs Python between 40 kernels (1.7 ms idle per launch): host "
            "work, not launches (HOST003)",
            lambda: observation(
                {"gpu_compute": 0.42, "other": 0.5, "forward": 0.08},
                step_ms=120,
                kernels={"matmul": 0.3, "elementwise": 0.12},
                kernels_per_step=40,
                median_kernel_us=900,
            ),
        ),
        Example(
            "139-ms step of fp32 convolutions, GPU idle 32%, 1480 launches of median "
            "2 µs, but kernels of ~130 µs hold 70% of kernel time: bound by its long "
            "kernels",
            lambda: observation(
                _BIG_CONVS,
                step_ms=139,
                kernels_per_step=1480,
                median_kernel_us=2,
                kernels={"matmul": 0.46, "normalization": 0.11, "elementwise": 0.09},
            ),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return (
            None
            if f.device == "gpu"
            else "no GPU events: launch overhead is measured against a GPU timeline"
        )

    def check(self, f: Facts) -> Finding | None:
        idle, per_launch = f.launch_idle, f.idle_per_launch_us
        if idle < self.t["min_idle_share"] or f.kernels_per_step < self.t["min_kernels_per_step"]:
            return None
        path = f.launch_path_share
        if per_launch is None or (
            per_launch > self.t["max_idle_per_launch_us"]
            and (path is None or path < self.t["min_launch_path_share"])
        ):
            return None
        short = f.short_kernel_share
        if short is None:  # no kernel table (a summary): the median kernel against the period
            short = 1.0 if f.median_kernel_us <= (f.launch_period_us or 0.0) else 0.0
        if short < self.t["min_short_kernel_share"]:
            return None
        on_path = (
            f" ({pct(path)} of it inside operators and runtime calls)"
            if per_launch > self.t["max_idle_per_launch_us"] and path is not None
            else ""
        )
        fix = first_fitting(f, "cuda_graphs", "larger_batch")
        lever = (
            (
                'capture the step in CUDA graphs: torch.compile(model, mode="reduce-overhead") replays its '
                "kernels with one launch (or give each launch more work with a larger batch)"
            )
            if fix == "cuda_graphs"
            else "CUDA graphs are on already: give each launch more work with a larger batch"
        )
        return self.finding(
            f,
            severity=idle,
            confidence=ramp(idle, self.t["min_idle_share"], self.t["high_idle_share"]),
            message=f"The GPU idles {pct(idle)} of the step while the host launches {f.kernels_per_step:.0f} "
            f"kernels of ~{f.median_kernel_us:.0f} µs, {per_launch:.0f} µs of idle per "
            f"launch{on_path}, and kernels no longer than the step's time per launch hold "
            f"{pct(short)} of kernel time: the step is launch-bound; {lever}.",
            evidence={
                "gpu_busy_share": f.gpu_busy,
                "launch_idle_share": idle,
                "kernels_per_step": f.kernels_per_step,
                "median_kernel_us": f.median_kernel_us,
                "idle_per_launch_us": per_launch,
                "short_kernel_share": short,
                "launch_path_share": path if path is not None else 0.0,
                "launch_period_us": f.launch_period_us or 0.0,
                "dataloader_exposed_share": f.loader_exposed,
                "comm_orchestration_share": f.comm_orchestration,
            },
            fix_id=fix,
        )
