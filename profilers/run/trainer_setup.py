"""Turn spec knobs into torch settings: device, backend flags, model wrapping, optimizer, precision.

Each function appends to ``warnings`` when a knob cannot act where the run is (e.g. ``tf32`` on a CPU), so
the run result says so instead of pretending the knob did something.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, ContextManager

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from profilers.errors import SpecError
from profilers.run.spec import TrainingSpec


def resolve_device(spec: TrainingSpec, local_rank: int) -> tuple[torch.device, str]:
    """``(device, human-readable name)``; ``auto`` means CUDA when present. Each rank takes its local GPU."""
    want = spec.device
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want == "cuda":
        if not torch.cuda.is_available():
            raise SpecError("device='cuda' but this machine has no usable CUDA device; use device='auto' or 'cpu'")
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device, torch.cuda.get_device_name(device)
    import platform

    return torch.device("cpu"), f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def apply_backend_flags(spec: TrainingSpec, device: torch.device, warnings: list[str]) -> None:
    """tf32, cudnn.benchmark, memory budget on CUDA; warnings for CUDA-only knobs elsewhere."""
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = spec.tf32
        torch.backends.cudnn.allow_tf32 = spec.tf32
        torch.backends.cudnn.benchmark = spec.cudnn_benchmark
        if spec.memory_budget_mb is not None:
            total_mb = torch.cuda.get_device_properties(device).total_memory / 2**20
            torch.cuda.set_per_process_memory_fraction(min(spec.memory_budget_mb / total_mb, 1.0), device)
        return
    for knob in ("tf32", "cudnn_benchmark", "pin_memory", "cuda_graphs"):
        if getattr(spec, knob):
            warnings.append(f"{knob}=True has no effect on {device.type} (CUDA only); ignored")
    if spec.precision == "fp16":
        warnings.append("precision='fp16' on CPU runs fp16 autocast with a CPU GradScaler; bf16 is usually faster")


def _checkpointed(module: nn.Module) -> nn.Module:
    """Route ``module``'s forward through non-reentrant activation checkpointing (keeps only its inputs)."""
    inner_forward = module.forward

    @functools.wraps(inner_forward)
    def forward(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return inner_forward(*args, **kwargs)
        return checkpoint(inner_forward, *args, use_reentrant=False, **kwargs)

    module.forward = forward
    return module


def cudnn_benchmark_note(model: nn.Module, spec: TrainingSpec, device_type: str) -> str | None:
    """The warning for ``cudnn_benchmark`` on CUDA when the model has no convolution for cuDNN to tune."""
    if not (spec.cudnn_benchmark and device_type == "cuda"):
        return None
    if any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules()):
        return None
    return f"cudnn_benchmark=True has no effect on {spec.workload} (no convolutions to tune); ignored"


def prepare_model(model: nn.Module, spec: TrainingSpec, device: torch.device, *, checkpoint_blocks: tuple[str, ...],
                  channels_last_applies: bool, warnings: list[str]) -> nn.Module:
    """Device, memory format and activation checkpointing (DDP and compile come after, in the trainer)."""
    note = cudnn_benchmark_note(model, spec, device.type)
    if note:
        warnings.append(note)
    model = model.to(device)
    if spec.channels_last:
        if channels_last_applies:
            # Module.to documents to(memory_format=...); torch's overloads omit it
            model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        else:
            warnings.append(f"channels_last=True has no effect on {spec.workload} (no 4-D activations); ignored")
    if spec.activation_checkpointing:
        if not checkpoint_blocks:
            warnings.append(f"activation_checkpointing=True: {spec.workload} declares no checkpoint blocks; ignored")
        for name in checkpoint_blocks:
            _checkpointed(model.get_submodule(name))
    return model


def compile_model(model: nn.Module, spec: TrainingSpec, device: torch.device, warnings: list[str]) -> nn.Module:
    """``torch.compile`` when asked; on CUDA ``cuda_graphs`` means compiling with CUDA graphs (reduce-overhead)."""
    mode = spec.compile_mode
    if spec.cuda_graphs and device.type == "cuda":
        if spec.compile and mode not in ("reduce-overhead", "max-autotune"):
            warnings.append(f"cuda_graphs=True overrides compile_mode={mode!r} with 'reduce-overhead'")
        return torch.compile(model, mode="reduce-overhead")  # type: ignore[return-value]
    if not spec.compile:
        return model
    return torch.compile(model, mode=None if mode == "default" else mode)  # type: ignore[return-value]


def make_optimizer(spec: TrainingSpec, params: Any, device: torch.device) -> torch.optim.Optimizer:
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[spec.optimizer]
    kwargs: dict[str, Any] = {"lr": spec.lr}
    if spec.optimizer == "sgd":
        kwargs["momentum"] = 0.9
    if spec.optimizer_impl == "foreach":
        kwargs["foreach"] = True
    elif spec.optimizer_impl == "fused":
        kwargs["fused"] = True
    # "default" passes neither: torch picks (foreach on CUDA, the per-parameter loop on CPU).
    return cls(params, **kwargs)


def warm_up_lr(spec: TrainingSpec, optimizer: torch.optim.Optimizer, step: int) -> None:
    """Linear warm-up over the first ``lr_warmup_steps`` optimizer steps, then ``lr``: from ``lr_warmup_from``
    (Goyal et al. 2017's gradual warm-up starts at the small batch's rate and reaches k × it) or, without one,
    from 0; nothing without a warm-up."""
    if spec.lr_warmup_steps <= 0 or step > spec.lr_warmup_steps:
        return
    start = spec.lr_warmup_from if spec.lr_warmup_from is not None else 0.0
    rate = start + (spec.lr - start) * min(1.0, (step + 1) / spec.lr_warmup_steps)
    for group in optimizer.param_groups:
        group["lr"] = rate


def autocast_context(spec: TrainingSpec, device: torch.device) -> ContextManager[Any]:
    if spec.precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if spec.precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(spec: TrainingSpec, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16 gradients underflow without loss scaling; bf16 has fp32's range and needs none."""
    if spec.precision != "fp16":
        return None
    return torch.amp.GradScaler(device.type)
