"""How the optimizer updates parameters, read from a real CPU trace: per tensor, foreach or fused.

Each case profiles three real steps of a small MLP with ``torch.profiler`` (the launcher's own trace format),
so the op names the facts match are the ones torch actually emits, not names written by hand.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from advisors.rules.compute.saturated import SaturatedDevice
from advisors.facts import derive
from advisors.observation import observe


def _trace(tmp_path: Path, optimizer: str, impl: str | None) -> Path:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 4))
    kwargs = {impl: True} if impl else {}
    opt = getattr(torch.optim, optimizer)(model.parameters(), lr=1e-3, **kwargs)
    x, y = torch.randn(32, 64), torch.randint(0, 4, (32,))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for step in range(3):
            with torch.profiler.record_function(f"ProfilerStep#{step}"):
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    path = tmp_path / f"{optimizer}-{impl}.pt.trace.json"
    prof.export_chrome_trace(str(path))
    return path


@pytest.mark.parametrize(
    ("optimizer", "impl", "expected"),
    [
        ("AdamW", None, "single_tensor"),
        ("AdamW", "foreach", "foreach"),
        ("AdamW", "fused", "fused"),
        ("SGD", "fused", "fused"),
        ("RMSprop", None, "single_tensor"),
    ],
)
def test_optimizer_implementation_is_read_from_its_ops(
    tmp_path: Path, optimizer: str, impl: str | None, expected: str
) -> None:
    facts = derive(observe(_trace(tmp_path, optimizer, impl)))
    assert facts.optimizer_class == optimizer
    assert facts.optimizer_impl == expected


def test_a_trace_without_an_optimizer_step_says_nothing(tmp_path: Path) -> None:
    model = nn.Linear(8, 8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for step in range(2):
            with torch.profiler.record_function(f"ProfilerStep#{step}"):
                model(torch.randn(4, 8)).sum().backward()
    path = tmp_path / "no-opt.pt.trace.json"
    prof.export_chrome_trace(str(path))
    facts = derive(observe(path))
    assert facts.optimizer_impl is None and facts.optimizer_class is None


def test_the_saturated_cpu_lever_is_the_fused_optimizer_only_while_it_is_not_fused(
    tmp_path: Path,
) -> None:
    """The optimizer facts of real traces, on a CPU step saturated in bf16 with the optimizer at 30% of it:
    COMP002 proposes ``fused_optimizer`` for a per-tensor or foreach AdamW, and compile once AdamW is fused."""
    saturated = {"forward": 0.3, "backward": 0.35, "optimizer": 0.3, "other": 0.05}
    rule = SaturatedDevice()
    for impl, expected in (
        (None, "fused_optimizer"),
        ("foreach", "fused_optimizer"),
        ("fused", "torch_compile"),
    ):
        facts = replace(
            derive(observe(_trace(tmp_path, "AdamW", impl))),
            shares=saturated,
            cpu_matmul_low=0.4,
            cpu_matmul_fp32=0.0,
            cpu_matmul_untyped=0.0,
            gemm_low_precision=1.0,
            compiled=False,
        )
        finding = rule.check(facts)
        assert finding is not None
        assert finding.fix_id == expected
        if expected == "fused_optimizer":
            assert finding.severity == pytest.approx(0.3)
            assert "AdamW takes 30% of the step" in finding.message
