"""COMP002 — the device is saturated: a GPU busy nearly all the step, or a CPU whose operators fill it."""

from __future__ import annotations

from typing import ClassVar

from advisors.facts import Facts
from advisors.fit import mixed_precision_on, precision_fix, precision_phrase
from profilers.efficiency.mfu import MFU_GOOD, MFU_PROBLEM
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.rules.memory.bandwidth import BandwidthBound, bandwidth_bound
from advisors.synthetic import observation, run_facts
from profilers.telemetry.summary import TelemetrySummary

# Optimizers with a fused CPU kernel (``torch.optim``'s ``fused=True`` on CPU tensors, torch >= 2.4).
FUSED_CPU_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD", "Adagrad"})
NO_CHEAP_FIX = (
    "no cheap fix: kernels already low precision and compiled; the remaining levers are the algorithm "
    "or more devices"
)


def _host(busy_pct: float, cores: int = 2, samples: int = 40) -> TelemetrySummary:
    return TelemetrySummary(
        source="host",
        samples=samples,
        rate_hz=10.0,
        cpu_count=cores,
        process_cpu_pct=busy_pct * cores,
        system_cpu_pct=busy_pct,
    )


class SaturatedDevice(Rule):
    """A saturated device is compute-bound by definition: nothing else holds the step, so only doing the math
    faster (or doing less of it) shortens it.

    *Saturated* reads the device's own work as a share of step time (``Facts.device_work``):

    - on a GPU, kernel, copy and set time not spent in exposed collectives — heavy communication that is
      fully overlapped does not take the verdict away — at least ``min_busy`` (0.85) of the step;
    - on a CPU, operator time in forward, backward and the optimizer (the operators *are* the compute there),
      at least ``min_cpu_busy`` (0.8): the rest of a CPU step is partly the same cores running Python between
      operators, which a trace cannot tell from idling. A stored run's host telemetry settles it: with
      ``min_telemetry_samples`` (5) or more samples showing the host's cores ``host_busy`` (0.9) busy,
      ``min_busy_with_host`` (0.7) of the step in operators is enough.

    A busy GPU whose kernels are mostly elementwise/normalization is bandwidth-bound instead (MEM004 says so,
    with the same thresholds): this rule stays silent there.

    Severity: the time the proposed lever acts on — the fp32 matmul share of the step for bf16 autocast, all of
    the device's work for compilation or when no cheap fix is left (then the levers are the algorithm or more
    devices, which act on all of it); so ``upper_bound_speedup`` is the bound of that lever. Thresholds:
    the busy shares above and ``high_busy`` (0.97, full confidence); ``max_low_precision`` (0.1) of matmul
    time in bf16/fp16 below which the math counts as fp32; ``min_fp32_matmul_share`` (0.2) of the step in
    fp32 matmuls before mixed precision is worth proposing.

    Fix, the next lever that fits the evidence: bf16 autocast when the matmuls are fp32; else a fused
    optimizer when the optimizer's step takes ``min_optimizer_share`` (0.15) of a CPU step and updates parameters
    one tensor at a time or with foreach ops (``fused=True`` for Adam, AdamW, SGD and Adagrad, whose fused CPU
    kernels exist; foreach for other optimizers still looping per tensor) — one keyword, the same arithmetic, no
    compile cost; else ``torch.compile`` when the model runs eagerly; else no fix — "no cheap fix: kernels
    already low precision and compiled; the remaining levers are the algorithm or more devices". The
    optimizer lever's severity is the optimizer's share of the step.

    Busy is not efficient: before "no cheap fix", the model FLOPs utilisation (``Facts.mfu``, from the ops'
    recorded shapes against the device's peak) is read. Under ``max_low_mfu`` (0.20: under 20% is a problem;
    30-45% is typical, 45-60% good) the device is busy with kernels too small or memory-bound to use it, and
    the lever is more work per kernel (a larger batch); at higher MFU "no cheap fix" is said with the figure.
    On V100/T4-class GPUs (no bf16 Tensor Cores) the precision lever is fp16 autocast with a GradScaler.
    """

    id, name, bottleneck = "COMP002", "saturated-device", Bottleneck.COMPUTE
    cause = "device_time"
    thresholds = {
        "min_busy": 0.85,
        "min_cpu_busy": 0.8,
        "high_busy": 0.97,
        "min_busy_with_host": 0.7,
        "host_busy": 0.9,
        "min_telemetry_samples": 5,
        "max_low_precision": 0.1,
        "min_fp32_matmul_share": 0.2,
        "min_optimizer_share": 0.15,
        "max_low_mfu": MFU_PROBLEM,
    }
    fix_id = "torch_compile"
    fires: ClassVar[tuple[Example, ...]] = (
        Example(
            "bf16 GEMM micro-benchmark: busy 98%, all GEMM",
            lambda: observation({"gpu_compute": 0.98}, kernels={"matmul": 0.98}, low_precision=1.0),
            fix="torch_compile",
            severity=0.98,
        ),
        Example(
            "GPU 97% busy in bf16, 45% of the step in NCCL but all of it overlapped, compiled",
            lambda: observation(
                {"gpu_compute": 0.97, "communication": 0.01},
                comm_total=0.45,
                comm_overlapped=0.44,
                ranks=(0, 1),
                low_precision=1.0,
                kernels={"matmul": 0.4, "elementwise": 0.25, "communication": 0.45},
                ops={"CompiledFunction": 0.6},
            ),
            fix=None,
            severity=0.97,
        ),
        Example(
            "CPU MLP: operators 92% of the step, fp32 matmuls 70%",
            lambda: observation(
                {"forward": 0.3, "backward": 0.52, "optimizer": 0.1},
                device="cpu",
                cpu_matmul={"fp32": 0.7},
            ),
            fix="bf16_autocast",
            severity=0.7,
        ),
        Example(
            "CPU MLP in bf16: operators 95% of the step, AdamW looping per tensor 35%",
            lambda: observation(
                {"forward": 0.25, "backward": 0.35, "optimizer": 0.35},
                device="cpu",
                cpu_matmul={"low": 0.5},
                optimizers=("AdamW",),
            ),
            fix="fused_optimizer",
            severity=0.35,
        ),
        Example(
            "CPU MLP in bf16: RMSprop looping per tensor 30% (no fused kernel: foreach)",
            lambda: observation(
                {"forward": 0.3, "backward": 0.35, "optimizer": 0.3},
                device="cpu",
                cpu_matmul={"low": 0.5},
                optimizers=("RMSprop",),
            ),
            fix="foreach_optimizer",
            severity=0.3,
        ),
        Example(
            "CPU MLP in bf16 with a fused AdamW already: compile is next",
            lambda: observation(
                {"forward": 0.35, "backward": 0.45, "optimizer": 0.15},
                device="cpu",
                cpu_matmul={"low": 0.5},
                optimizers=("AdamW",),
                ops={"aten::_fused_adamw_": 0.14},
            ),
            fix="torch_compile",
            severity=0.95,
        ),
        Example(
            "CPU run: operators 75% of the step, both cores 98% busy",
            lambda: observation(
                {"forward": 0.25, "backward": 0.45, "optimizer": 0.05, "dataloader": 0.04},
                device="cpu",
                run=run_facts(telemetry=_host(98.0)),
            ),
            fix="torch_compile",
            severity=0.75,
        ),
    )
    passes: ClassVar[tuple[Example, ...]] = (
        Example(
            "busy but pointwise-dominated (bandwidth-bound: MEM004)",
            lambda: observation({"gpu_compute": 0.9}, kernels={"elementwise": 0.7, "matmul": 0.2}),
        ),
        Example(
            "GEMMs with the device half idle",
            lambda: observation({"gpu_compute": 0.5}, kernels={"matmul": 0.45}),
        ),
        Example(
            "CPU waits for a single-process loader 40% of the step",
            lambda: observation({"forward": 0.2, "backward": 0.3, "dataloader": 0.4}, device="cpu"),
        ),
        Example(
            "CPU run: operators 78% of the step, no telemetry",
            lambda: observation(
                {"forward": 0.25, "backward": 0.45, "optimizer": 0.08}, device="cpu"
            ),
        ),
        Example(
            "CPU run: operators 75% of the step, cores 55% busy",
            lambda: observation(
                {"forward": 0.25, "backward": 0.45, "optimizer": 0.05},
                device="cpu",
                run=run_facts(telemetry=_host(55.0)),
            ),
        ),
    )

    def check(self, f: Facts) -> Finding | None:
        work = f.device_work
        host = self._host_busy(f)
        if not self.saturated(f) or bandwidth_bound(f, BandwidthBound.thresholds):
            return None
        floor = self.t["min_cpu_busy" if f.device == "cpu" else "min_busy"]
        return self.compute_finding(
            f, ramp(max(work, host or 0.0), floor, self.t["high_busy"]), self._what(f, work, host)
        )

    def saturated(self, f: Facts) -> bool:
        """The device busy at least its floor (a CPU: or its cores busy with the run's own processes)."""
        work, host = f.device_work, self._host_busy(f)
        return work >= self.t[
            "min_cpu_busy" if f.device == "cpu" else "min_busy"
        ] or (  # trace, or with telemetry
            f.device == "cpu"
            and host is not None
            and host >= self.t["host_busy"]
            and work >= self.t["min_busy_with_host"]
        )

    def compute_finding(self, f: Facts, confidence: float, what: str) -> Finding:
        """The finding for a step the device's work makes: the next lever that fits, its stake as severity."""
        fix, lever = self._lever(f)
        stake = (
            (self._fp32_matmul(f) or 0.0)
            if fix in ("bf16_autocast", "fp16_autocast")
            else f.shares.get("optimizer", 0.0)
            if fix in ("fused_optimizer", "foreach_optimizer")
            else f.device_work
        )
        return self.finding(
            f,
            severity=stake,
            confidence=confidence,
            message=f"{what}: the step is compute-bound; {lever}.",
            evidence=self._evidence(f, f.device_work, self._host_busy(f)),
            fix_id=fix,
        )

    def _host_busy(self, f: Facts) -> float | None:
        """Share of the cores the run could use that its own process tree kept busy during steady steps (the
        host's busy share only when the run's own use was not recorded), when the telemetry has enough samples.
        Other programs' load is contention, not this run's saturation."""
        tel = f.telemetry
        if tel is None or tel.samples < self.t["min_telemetry_samples"]:
            return None
        return tel.run_cpu_busy if tel.run_cpu_busy is not None else tel.host_cpu_busy

    def _fp32_matmul(self, f: Facts) -> float | None:
        """Share of the step in fp32 matmuls (0 without matmuls), or ``None`` when a CPU trace recorded matmuls
        without their input types (kernel names always say it on a GPU)."""
        low = f.gemm_low_precision
        if f.device == "gpu":
            if low is None or low >= self.t["max_low_precision"]:
                return 0.0
            return f.kernel_step_share.get("matmul", 0.0) * (1.0 - low)
        typed = f.cpu_matmul_fp32 + f.cpu_matmul_low
        if typed <= 0:
            return None if f.cpu_matmul_untyped > 0 else 0.0
        return f.cpu_matmul_fp32 if f.cpu_matmul_low / typed < self.t["max_low_precision"] else 0.0

    def _lever(self, f: Facts) -> tuple[str | None, str]:
        fp32 = self._fp32_matmul(f)
        if (
            fp32 is not None
            and fp32 >= self.t["min_fp32_matmul_share"]
            and not mixed_precision_on(f)
            and precision_fix(f) is not None
        ):
            return precision_fix(
                f
            ), f"its matmuls run in fp32 ({pct(fp32)} of the step): {precision_phrase(f)}"
        optimizer = self._optimizer_lever(f)
        if optimizer is not None:
            return optimizer
        if not f.compiled:
            unknown = (
                " (matmul precision not recorded: profile with record_shapes=True to see whether bf16 "
                "autocast applies)"
                if fp32 is None
                else ""
            )
            return (
                "torch_compile",
                f"the model runs eagerly: compile it with torch.compile{unknown}",
            )
        mfu = f.mfu
        if mfu is not None and mfu < self.t["max_low_mfu"]:
            return "larger_batch", (
                f"busy is not efficient: MFU {100 * mfu:.1f}% (under {pct(MFU_PROBLEM)} is a "
                "problem): the kernels are small or memory-bound; give each kernel more work "
                "(a larger batch or wider layers) and look for memory-bound kernels"
            )
        if fp32 is None:
            return (
                None,
                "the model is compiled and its matmul precision is not recorded: no cheap fix is "
                "known; profile with record_shapes=True to see whether bf16 autocast applies",
            )
        if mfu is not None:
            return None, f"MFU {100 * mfu:.1f}% ({_mfu_band(mfu)}): {NO_CHEAP_FIX}"
        return None, NO_CHEAP_FIX

    def _optimizer_lever(self, f: Facts) -> tuple[str, str] | None:
        """A fused (or foreach) optimizer when a CPU step spends ``min_optimizer_share`` in an optimizer that is
        not fused yet. The GPU default is already multi-tensor, and its optimizer time is kernel time the
        breakdown does not separate, so this lever reads CPU steps only."""
        share = f.shares.get("optimizer", 0.0)
        if (
            f.device != "cpu"
            or share < self.t["min_optimizer_share"]
            or f.optimizer_impl in (None, "fused")
        ):
            return None
        name = f.optimizer_class or "the optimizer"
        if f.optimizer_class in FUSED_CPU_OPTIMIZERS:
            return "fused_optimizer", (
                f"{name} takes {pct(share)} of the step updating parameters "
                f"{'with foreach ops' if f.optimizer_impl == 'foreach' else 'one tensor at a time'}"
                f": construct it with fused=True (one kernel for all parameters)"
            )
        if f.optimizer_impl == "single_tensor":
            return "foreach_optimizer", (
                f"{name} takes {pct(share)} of the step updating parameters one tensor at "
                "a time: construct it with foreach=True"
            )
        return None

    def _what(self, f: Facts, work: float, host: float | None) -> str:
        if f.device == "gpu":
            overlapped = (
                f" ({pct(f.comm_total)} of the step in collectives, overlapped)"
                if f.comm_total >= 0.05 and f.comm_exposed < 0.05
                else ""
            )
            return f"The GPU is saturated: busy {pct(work)} of the step{overlapped}"
        s = f.shares
        tel = f.telemetry
        own = tel is not None and tel.run_cpu_busy is not None and host == tel.run_cpu_busy
        # the run's own share of its cores, named as such: "the host's cores 48% busy" read as a contradiction
        # of the telemetry card's "2 host cores 99% busy" (the whole host, other programs included)
        cores = (
            ""
            if host is None
            else f", this run's processes keeping {pct(host)} of its cores busy"
            if own
            else f", the host's cores {pct(host)} busy"
        )
        return (
            f"The CPU is saturated: operators fill {pct(work)} of the step (forward {pct(s.get('forward', 0.0))}, "
            f"backward {pct(s.get('backward', 0.0))}, optimizer {pct(s.get('optimizer', 0.0))}){cores}"
        )

    def _evidence(self, f: Facts, work: float, host: float | None) -> dict:
        s = f.shares
        out = {
            "device": f.device,
            "device_work_share": work,
            "compiled": f.compiled,
            "fp32_matmul_share_of_step": self._fp32_matmul(f),
            "mfu": f.mfu,
        }
        if f.device == "gpu":
            out.update(
                {
                    "gpu_busy_share": f.gpu_busy,
                    "gemm_share_of_kernel_time": f.kernel_mix.get("matmul", 0.0),
                    "gemm_low_precision_share": f.gemm_low_precision,
                    "comm_total_share": f.comm_total,
                    "exposed_comm_share": f.comm_exposed,
                }
            )
        else:
            tel = f.telemetry
            out.update(
                {
                    "forward_share": s.get("forward", 0.0),
                    "backward_share": s.get("backward", 0.0),
                    "optimizer_share": s.get("optimizer", 0.0),
                    "optimizer": f.optimizer_class,
                    "optimizer_impl": f.optimizer_impl,
                    "matmul_share_of_step": f.cpu_matmul_fp32
                    + f.cpu_matmul_low
                    + f.cpu_matmul_untyped,
                    "host_cpu_busy": host,
                    "cpu_count": tel.cpu_count if tel is not None else None,
                }
            )
        return out


def _mfu_band(mfu: float) -> str:
    """Where an MFU falls among the field's rules of thumb."""
    if mfu < MFU_PROBLEM:
        return f"under {pct(MFU_PROBLEM)}: a problem"
    if mfu < MFU_GOOD[0]:
        return "typical is 30-45%"
    return "good: 45-60%" if mfu < MFU_GOOD[1] else "above 60%: excellent"
