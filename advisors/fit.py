"""Does a fix fit the run? Advice never repeats what the run already does.

``already_done(fix_id, facts)`` reads what the fix is *about* (not every field of its patch: a run with
``num_workers=2`` already loads in worker processes, whatever its ``prefetch_factor``) from the stored run's
spec when there is one, and from the trace otherwise: a multi-process DataLoader iterator, compiled regions or
Triton kernels, GEMMs already in bf16/fp16/fp8, pinned copies, a fused or foreach optimizer step.
``first_fitting`` picks the first of a rule's levers that the run does not already pull. ``loader_numbers``
gives DataLoader advice the run's own figures (its cores, its current workers) instead of a hard-coded count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from advisors.facts import Facts
from advisors.fixes import worker_count
from profilers.run.run_config import RunConfig

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
    no_bf16 = (peak is not None and not peak.has_fast_bf16) or (arch is not None and not arch.fast_bf16)
    return "fp16_autocast" if no_bf16 else "bf16_autocast"


def precision_phrase(f: Facts) -> str:
    """How to say :func:`precision_fix` in a sentence, naming the device when it decides."""
    peak = f.device_peak
    if f.cpu_bf16_fast is False:
        return f"bf16 would not help on this CPU ({cpu_bf16_basis(f)})"
    if precision_fix(f) == "fp16_autocast" and peak is not None:
        return f"train under fp16 autocast with a GradScaler (the {peak.name} has no bf16 Tensor Cores)"
    if precision_fix(f) == "fp16_autocast" and (arch := f.gpu_arch) is not None:
        return (f"train under fp16 autocast with a GradScaler: this is {arch.label}, which has no bf16 Tensor "
                f"Cores ({arch.basis})")
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
    return (f.spec is not None and (f.spec.num_workers or 0) > 0) or f.loader_mode == "multi_process"


def _spec(test: Callable[[RunConfig], bool]) -> Callable[[Facts], bool]:
    return lambda f: f.spec is not None and test(f.spec)


#: fix id -> "the run already does this", from the spec and/or the trace.
_DONE: dict[str, Callable[[Facts], bool]] = {
    "dataloader_workers": workers_on,
    "prefetch_pinned": _spec(lambda s: (s.num_workers or 0) > 0 and s.persistent_workers and s.pin_memory
                             and (s.prefetch_factor or 2) >= 4),
    "cache_decoded": _spec(lambda s: s.cache_decoded),
    "pin_memory": lambda f: (f.spec is not None and f.spec.pin_memory)
    or (f.spec is None and f.pinned_copy > 0 and f.pageable_copy == 0),
    "bf16_autocast": mixed_precision_on,
    "fp16_autocast": mixed_precision_on,
    "tf32": lambda f: (f.spec is not None and (f.spec.tf32 or f.spec.precision != "fp32"))
    or (f.efficiency is not None and f.efficiency.dtype == "tf32"),  # the trace's matmul kernels are TF32 ones
    "torch_compile": lambda f: f.compiled,
    "channels_last": _spec(lambda s: s.channels_last),
    "fused_optimizer": lambda f: (f.spec is not None and f.spec.optimizer_impl == "fused")
    or f.optimizer_impl == "fused",
    "foreach_optimizer": lambda f: (f.spec is not None and f.spec.optimizer_impl in ("foreach", "fused"))
    or f.optimizer_impl in ("foreach", "fused"),
    "cudnn_benchmark": _spec(lambda s: s.cudnn_benchmark),
    "ddp_no_sync": _spec(lambda s: s.ddp_no_sync),
    "grad_compression": _spec(lambda s: s.grad_compression != "none"),
    "cuda_graphs": _spec(lambda s: s.cuda_graphs),
    "activation_checkpointing": _spec(lambda s: s.activation_checkpointing),
}


def already_done(fix_id: str | None, f: Facts) -> bool:
    """True when the run already does what ``fix_id`` is about (``None`` and relative fixes never are)."""
    test = _DONE.get(fix_id or "")
    return bool(test and test(f))


def first_fitting(f: Facts, *fix_ids: str) -> str | None:
    """The first of ``fix_ids`` the run does not already do, or ``None`` when it does them all."""
    return next((x for x in fix_ids if not already_done(x, f)), None)


@dataclass(frozen=True)
class LoaderNumbers:
    """The run's own DataLoader figures: host cores (telemetry), workers now (spec), workers to use."""

    cores: int | None
    current: int | None
    suggested: int

    def phrase(self) -> str:
        """``num_workers=N`` with where N comes from, e.g. "num_workers=2 (2 cores; now 0)"."""
        where = [f"{self.cores} cores" if self.cores else "one per core, 2 to 8"]
        if self.current is not None:
            where.append(f"now {self.current}")
        return f"num_workers={self.suggested} ({'; '.join(where)})" if self.cores else \
            f"num_workers=min(max(os.cpu_count(), 2), 8) ({'; '.join(where)})"


def loader_numbers(f: Facts) -> LoaderNumbers:
    cores = f.telemetry.cpu_count if f.telemetry is not None else None
    current = f.spec.num_workers if f.spec is not None and f.spec.num_workers is not None else \
        (0 if f.loader_mode == "single_process" else None)
    return LoaderNumbers(cores, current, worker_count(cores, current or 0))
