"""Injected gradient accumulation works in either loop order (issue 42: every loop that calls ``zero_grad()``
after ``step()`` — run_clm_no_trainer, the Fabric example — was refused with a false reason)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from stepwise_agent.inject.accumulate import Accumulation
from stepwise_agent.inject.report import InjectionReport


def _data() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 6, generator=g), torch.randn(4, 1, generator=g)) for _ in range(4)]


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(6, 1)


def _train(zero_after_step: bool, k: int | None) -> tuple[nn.Module, InjectionReport]:
    model, report = _model(), InjectionReport({"grad_accum": k or 1})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if k:
        Accumulation(opt, k, report.knob("grad_accum"), "opt at train.py:1")
    for x, y in _data():
        if not zero_after_step:
            opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if zero_after_step:
            opt.zero_grad()
    return model, report


def _reference() -> nn.Module:
    """Two optimizer steps on pairs of micro-batches, their gradients averaged by hand."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = _data()
    for pair in (data[:2], data[2:]):
        opt.zero_grad()
        for x, y in pair:
            (nn.functional.mse_loss(model(x), y) / 2).backward()
        opt.step()
    return model


@pytest.mark.parametrize(
    "zero_after_step", [False, True], ids=["zero-backward-step", "backward-step-zero"]
)
def test_accumulation_adds_up_micro_batches_in_either_loop_order(zero_after_step: bool) -> None:
    model, report = _train(zero_after_step, k=2)
    knob = report.knob("grad_accum")
    assert knob is not None and knob.acted is True, knob.why
    want = _reference()
    for got, ref in zip(model.parameters(), want.parameters()):
        assert torch.allclose(got, ref, atol=1e-6)
