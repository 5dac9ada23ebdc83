"""Does a fix fit the run? What the run already does and what its machine leaves room for.

The predicates the fixes' ``done`` tests are made of (:mod:`advisors.fixes`: a run with ``num_workers=2`` already
loads in worker processes, whatever its ``prefetch_factor``), read from the stored run's spec when there is one and
from the trace otherwise (a multi-process DataLoader iterator, GEMMs already in bf16/fp16/fp8); which precision fix
the device can take; and the intra-op threads that fit the cores other programs left free.
"""

from __future__ import annotations

import math
from typing import Callable

from advisors.facts import Facts
from profilers.run.run_config import RunConfig
from profilers.telemetry.summary import TelemetrySummary
from profilers.telemetry.threads import ThreadUse

#: GEMM/matmul time already in reduced precision above which mixed precision counts as on.
MIXED_PRECISION_ON = 0.1


def mixed_precision_on(f: Facts) -> bool:
    """bf16/fp16/fp8 already: the spec says so, the GEMM kernels are Tensor Core ones, or the host matmuls'
    recorded input types are."""
    if f.spec is not None and f.spec.precision != "fp32":
        return True
    return f.gemm_low_precision is not None and f.gemm_low_precision >= MIXED_PRECISION_ON


def precision_fix(f: Facts) -> str | None:
    """The mixed-precision fix this device can take: fp16 autocast with a GradScaler on a GPU known to have no
    bf16 fast path (V100, T4 and older: :mod:`profilers.efficiency.peaks`); none on a CPU whose bf16 matmuls
    were measured slower than fp32 (or that lacks AVX512-BF16/AMX: :func:`Facts.cpu_bf16_fast`); bf16 autocast
    elsewhere (Ampere and newer, AMD CDNA2+, a CPU with a bf16 path, or a device nothing is known of)."""
    if f.cpu_bf16_fast is False:
        return None
    peak, arch = f.device_peak, f.gpu_arch
    no_bf16 = (peak is not None and not peak.has_fast_bf16) or (
        arch is not None and not arch.fast_bf16
    )
    return "fp16_autocast" if no_bf16 else "bf16_autocast"


def precision_phrase(f: Facts) -> str:
    """How to say :func:`precision_fix` in a sentence, naming the device when it decides."""
    peak = f.device_peak
    if f.cpu_bf16_fast is False:
        return f"bf16 would not help on this CPU ({cpu_bf16_basis(f)})"
    if precision_fix(f) == "fp16_autocast" and peak is not None:
        return f"train under fp16 autocast with a GradScaler (the {peak.name} has no bf16 Tensor Cores)"
    if precision_fix(f) == "fp16_autocast" and (arch := f.gpu_arch) is not None:
        return (
            f"train under fp16 autocast with a GradScaler: this is {arch.label}, which has no bf16 Tensor "
            f"Cores ({arch.basis})"
        )
    if f.device == "cpu" and f.cpu_bf16_fast is None:
        return "train under bf16 autocast if this CPU has AVX512-BF16 or AMX (on AVX2 alone bf16 matmuls are slower)"
    return "train under bf16 autocast"


def cpu_bf16_basis(f: Facts) -> str:
    return f.run.cpu_bf16_basis if f.run is not None and f.run.cpu_bf16_basis else "not recorded"


def tf32_fits(f: Facts) -> bool:
    """TF32 exists from Ampere on: never advised for a GPU the peak table knows, or its kernel names show, to be
    older."""
    peak, arch = f.device_peak, f.gpu_arch
    if peak is not None:
        return peak.ampere_or_newer
    return arch is None or arch.fast_bf16


def workers_on(f: Facts) -> bool:
    """The DataLoader already loads in worker processes (spec, or the trace's multi-process iterator)."""
    return (
        f.spec is not None and (f.spec.num_workers or 0) > 0
    ) or f.loader_mode == "multi_process"


def spec_says(test: Callable[[RunConfig], bool]) -> Callable[[Facts], bool]:
    """ "The run already does it", read from its stored spec (never true without one)."""
    return lambda f: f.spec is not None and test(f.spec)


def workers_that_fit(usable: float, other_cores: float | None, processes: int) -> int:
    """DataLoader workers that fit beside the training processes' intra-op threads
    (:func:`threads_for` each) on the free cores: the cores left over, at least one (loading stays
    off the training loop)."""
    threads = threads_for(usable, other_cores, processes) * max(processes, 1)
    left = free_cores(usable, other_cores) - threads
    return max(1, math.floor(left + 1e-9))


#: other programs' use of the cores below this is background (the sampler, a shell), not contention
OTHERS_MIN_CORES = 0.25


def free_cores(usable: float, other_cores: float | None) -> float:
    """The cores the run can have: its usable cores less what other programs took (their use under
    ``OTHERS_MIN_CORES`` is background, not taken)."""
    others = other_cores if other_cores is not None and other_cores >= OTHERS_MIN_CORES else 0.0
    return max(usable - others, 0.0)


def usable_cores(t: ThreadUse, tel: TelemetrySummary | None) -> int | None:
    """The cores the training processes may run on: their CPU affinity, else the machine's."""
    return t.affinity or (tel.usable_cores if tel is not None else None) or t.cpu_count


def threads_for(usable: float, other_cores: float | None, processes: int) -> int:
    """Intra-op threads per training process that fit the free cores (at least one)."""
    return max(1, math.floor(free_cores(usable, other_cores) / max(processes, 1) + 1e-9))
