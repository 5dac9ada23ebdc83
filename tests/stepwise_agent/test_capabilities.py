"""The agent's torch checks against fakes of older APIs (only torch 2.13.0 installs here): a knob that torch
cannot do is "not applied: torch X.Y has no …" in injected.json, never a crash."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

from stepwise_agent import capabilities as capmod
from stepwise_agent.capabilities import detect
from stepwise_agent.inject import Injector


def fake_torch(
    version: str,
    *,
    amp: bool = True,
    module_compile: bool = True,
    compile: bool = True,
    amp_scaler: bool = True,
    autocast: bool = True,
    cuda_amp: bool = True,
) -> Any:
    """A namespace with the shape of an older torch: only the attributes ``detect`` looks up."""
    ns = types.SimpleNamespace
    profiler = ns(
        schedule=object(),
        tensorboard_trace_handler=object(),
        profile=ns(export_chrome_trace=object()),
    )
    amp_mod = ns(
        **({"autocast": object()} if amp else {}),
        **({"GradScaler": object()} if amp_scaler else {}),
    )
    cuda = ns(amp=ns(autocast=object(), GradScaler=object()) if cuda_amp else ns())
    nn = ns(Module=ns(**({"compile": object()} if module_compile else {})))
    optim = ns(optimizer=ns(register_optimizer_step_post_hook=object()))
    return ns(
        __version__=version,
        profiler=profiler,
        amp=amp_mod,
        cuda=cuda,
        nn=nn,
        optim=optim,
        **({"compile": object()} if compile else {}),
        **({"autocast": object()} if autocast else {}),
    )


def test_this_machines_torch_offers_everything() -> None:
    caps = detect(torch)
    assert caps.supported() and caps.profiler_schedule and caps.chrome_trace and caps.compile
    assert caps.autocast == "torch.amp.autocast" and caps.grad_scaler == "torch.amp.GradScaler"
    assert caps.step_post_hook and caps.module_compile
    assert all(
        caps.refusal(k, v, "cpu") is None for k, v in [("autocast", "bf16"), ("compile", True)]
    )


def test_torch_2_1_has_no_device_generic_grad_scaler_nor_module_compile() -> None:
    caps = detect(fake_torch("2.1.2+cu121", amp_scaler=False, module_compile=False))
    assert caps.version == "2.1.2" and caps.supported()
    assert (
        caps.grad_scaler == "torch.cuda.amp.GradScaler" and not caps.module_compile and caps.compile
    )
    assert caps.refusal("autocast", "fp16", "cuda") is None  # the CUDA GradScaler serves
    assert (
        caps.refusal("compile", True, "cpu") is None
    )  # forward is compiled instead of Module.compile


def test_an_older_torch_without_compile_or_cpu_autocast_refuses_in_words() -> None:
    caps = detect(
        fake_torch(
            "1.9.0",
            amp=False,
            autocast=False,
            compile=False,
            amp_scaler=False,
            module_compile=False,
        )
    )
    assert not caps.supported() and caps.autocast == "torch.cuda.amp.autocast"
    assert caps.refusal("compile", True, "cpu") == "not applied: torch 1.9 has no torch.compile"
    assert (
        caps.refusal("autocast", "bf16", "cpu") == "not applied: torch 1.9 has no autocast on cpu"
    )
    assert caps.refusal("autocast", "bf16", "cuda") is None


def test_fused_is_read_from_the_optimizers_own_signature() -> None:
    caps = detect(torch)

    class OldAdam(torch.optim.Optimizer):
        def __init__(self, params: Any, lr: float = 1e-3, foreach: bool | None = None) -> None:
            super().__init__(params, {"lr": lr, "foreach": foreach})

    assert caps.optimizer_refusal(torch.optim.AdamW, "fused") is None
    assert caps.optimizer_refusal(OldAdam, "foreach") is None
    assert (
        caps.optimizer_refusal(OldAdam, "fused")
        == f"not applied: torch {caps.short_version} has no fused= for OldAdam"
    )


def test_the_injector_refuses_what_the_fake_torch_lacks_and_keeps_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caps = detect(fake_torch("2.0.1", compile=False))
    injector = Injector({"compile": True, "autocast": "bf16"}, device="cpu", caps=caps)
    assert "compile" not in injector.knobs and injector.knobs == {"autocast": "bf16"}
    injector.modules.finish()  # what would later say "no module called" must not replace the first reason
    report = injector.report.to_json()["knobs"]
    assert report["compile"] == {
        "value": True,
        "acted": False,
        "refused": True,
        "evidence": [],
        "why": "not applied: torch 2.0 has no torch.compile",
    }


def test_autocast_and_scaler_are_built_through_the_api_found() -> None:
    caps = detect(torch)
    with capmod.autocast_context(torch, caps, "cpu", torch.bfloat16):
        out = torch.nn.Linear(4, 4)(torch.randn(2, 4))
    assert out.dtype == torch.bfloat16
    assert capmod.grad_scaler(torch, caps, "cpu") is not None
