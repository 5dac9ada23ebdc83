"""What the user's torch offers, checked once at boot, before the agent uses any of it.

The agent runs in the user's interpreter, with whatever torch is installed there (the oldest supported is
:data:`OLDEST_SUPPORTED`). Instead of assuming this machine's version, every API the agent or a fix knob needs
is looked up on the module it was given: a knob torch cannot do ends "not applied: torch X.Y has no …" in
``injected.json`` (:meth:`TorchCapabilities.refusal`), never a crash. :func:`detect` takes the torch module as
an argument so tests can hand it a fake of an older API.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import asdict, dataclass
from typing import Any

OLDEST_SUPPORTED = (
    2,
    1,
)  # torch.compile, register_optimizer_step_post_hook, torch.autocast(device_type) all exist


@dataclass(frozen=True)
class TorchCapabilities:
    """The APIs found on one torch module. Names are the dotted API each flag stands for."""

    version: str  # "2.13.0" (local build suffixes such as "+cpu" dropped)
    profiler_schedule: bool  # torch.profiler.schedule
    chrome_trace: bool  # torch.profiler.profile.export_chrome_trace
    trace_handler: bool  # torch.profiler.tensorboard_trace_handler
    autocast: (
        str | None
    )  # "torch.amp.autocast" | "torch.autocast" | "torch.cuda.amp.autocast" | None
    grad_scaler: (
        str | None
    )  # "torch.amp.GradScaler" (device-generic) | "torch.cuda.amp.GradScaler" | None
    compile: bool  # torch.compile
    module_compile: (
        bool  # nn.Module.compile (in place; torch >= 2.2), else forward is compiled instead
    )
    step_post_hook: bool  # torch.optim.optimizer.register_optimizer_step_post_hook

    @property
    def short_version(self) -> str:
        return ".".join(self.version.split(".")[:2])

    def supported(self) -> bool:
        """At least :data:`OLDEST_SUPPORTED` (a version that does not parse counts as supported)."""
        parsed = version_tuple(self.version)
        return parsed is None or parsed[:2] >= OLDEST_SUPPORTED

    def refusal(self, knob: str, value: Any, device: str) -> str | None:
        """Why ``knob=value`` cannot be injected with this torch on ``device``; None when it can."""
        missing: str | None = None
        if knob == "autocast" and value:
            if self.autocast is None or (
                device != "cuda" and self.autocast == "torch.cuda.amp.autocast"
            ):
                missing = f"autocast on {device}"
            elif value == "fp16" and device == "cuda" and self.grad_scaler is None:
                missing = "GradScaler (fp16 needs loss scaling)"
        elif knob in ("compile", "compile_mode") and value and not self.compile:
            missing = "torch.compile"
        if missing is None:
            return None
        return f"not applied: torch {self.short_version} has no {missing}"

    def optimizer_refusal(self, cls: type, impl: str) -> str | None:
        """``fused=`` / ``foreach=`` must be a parameter of the optimizer's constructor in this torch."""
        if impl in optimizer_parameters(cls):
            return None
        return f"not applied: torch {self.short_version} has no {impl}= for {cls.__name__}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def version_tuple(version: str) -> tuple[int, ...] | None:
    parts = []
    for piece in version.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def optimizer_parameters(cls: type) -> frozenset[str]:
    init = cls.__dict__.get("__init__", getattr(cls, "__init__", None))
    try:
        return frozenset(inspect.signature(init).parameters)
    except (TypeError, ValueError):
        return frozenset()


def _has(obj: Any, dotted: str) -> bool:
    for name in dotted.split("."):
        obj = getattr(obj, name, None)
        if obj is None:
            return False
    return True


def detect(torch: Any) -> TorchCapabilities:
    """Look up every API on ``torch`` (the real module, or a fake standing in for an older one)."""
    if _has(torch, "amp.autocast"):
        autocast: str | None = "torch.amp.autocast"
    elif _has(torch, "autocast"):
        autocast = "torch.autocast"
    elif _has(torch, "cuda.amp.autocast"):
        autocast = "torch.cuda.amp.autocast"
    else:
        autocast = None
    if _has(torch, "amp.GradScaler"):
        scaler: str | None = "torch.amp.GradScaler"
    elif _has(torch, "cuda.amp.GradScaler"):
        scaler = "torch.cuda.amp.GradScaler"
    else:
        scaler = None
    return TorchCapabilities(
        version=str(getattr(torch, "__version__", "unknown")).split("+")[0],
        profiler_schedule=_has(torch, "profiler.schedule"),
        chrome_trace=_has(torch, "profiler.profile.export_chrome_trace"),
        trace_handler=_has(torch, "profiler.tensorboard_trace_handler"),
        autocast=autocast,
        grad_scaler=scaler,
        compile=_has(torch, "compile"),
        module_compile=_has(torch, "nn.Module.compile"),
        step_post_hook=_has(torch, "optim.optimizer.register_optimizer_step_post_hook")
        or hasattr(
            sys.modules.get(f"{getattr(torch, '__name__', '')}.optim.optimizer"),
            "register_optimizer_step_post_hook",
        ),
    )


def autocast_context(torch: Any, caps: TorchCapabilities, device: str, dtype: Any) -> Any:
    """An autocast context manager through whichever API this torch has (see :meth:`refusal` first)."""
    if caps.autocast == "torch.amp.autocast":
        return torch.amp.autocast(device_type=device, dtype=dtype)
    if caps.autocast == "torch.autocast":
        return torch.autocast(device_type=device, dtype=dtype)
    return torch.cuda.amp.autocast(dtype=dtype)


def grad_scaler(torch: Any, caps: TorchCapabilities, device: str) -> Any:
    """A GradScaler for ``device``: the device-generic one (torch >= 2.3) or the CUDA one before it."""
    if caps.grad_scaler == "torch.amp.GradScaler":
        return torch.amp.GradScaler(device)
    return torch.cuda.amp.GradScaler()
