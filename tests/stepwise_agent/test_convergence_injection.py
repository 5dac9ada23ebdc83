"""The convergence knobs of ``--to-quality``, injected in-process into a loop written the way scripts write it:
the batch the loop sees, the rates the optimizer steps with, accumulation against an explicit large batch, the
scripts that do not allow accumulation, and SGD → AdamW."""

from __future__ import annotations

import inspect
import sys
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from stepwise_agent.inject import Injector
from stepwise_agent.steps import StepDetector


def _line(needle: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line))  # type: ignore[arg-type]
    return next(
        i for i, text in enumerate(src, start or 1) if needle in text and "_line(" not in text
    )


def _data(n: int = 64) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g))


def test_batch_times_k_is_the_batch_the_loop_sees(injected: Any) -> None:
    inj = injected({"batch_scale": 4})
    loader = DataLoader(_data(), batch_size=8)  # the user's DataLoader
    sizes = [len(x) for x, _ in loader]
    assert sizes == [32, 32]
    report = inj.finish()
    knob = report["knobs"]["batch_scale"]
    line = _line("# the user's DataLoader")
    assert knob["acted"] and f"test_convergence_injection.py:{line}" in knob["evidence"][0]
    assert "the script asked 8" in knob["evidence"][0]
    assert report["loader"]["batch_size"] == 32 and report["sites"]["dataloader"]["line"] == line


def test_a_batch_sampler_is_not_scaled_and_says_why(injected: Any) -> None:
    inj = injected({"batch_scale": 4})
    sampler = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(64)), 8, False)
    assert [len(x) for x, _ in DataLoader(_data(), batch_sampler=sampler)][0] == 8
    knob = inj.finish()["knobs"]["batch_scale"]
    assert not knob["acted"] and "no integer batch_size" in knob["why"]


def test_no_dataloader_at_all_is_not_applied(injected: Any) -> None:
    inj = injected({"batch_scale": 4})
    knob = inj.finish()["knobs"]["batch_scale"]
    assert not knob["acted"] and "makes its batches itself" in knob["why"]


def test_lr_is_scaled_in_every_group_and_a_later_scheduler_starts_from_it(injected: Any) -> None:
    inj = injected({"lr_scale": 4.0})
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(
        [{"params": [model.weight]}, {"params": [model.bias], "lr": 0.5}], lr=0.1, momentum=0.9
    )
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.4, 2.0])
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    assert sched.base_lrs == pytest.approx([0.4, 2.0])
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
    assert adam.param_groups[0]["lr"] == pytest.approx(4e-3)
    report = inj.finish()
    assert report["knobs"]["lr_scale"]["acted"]
    assert "SGD at test_convergence_injection.py" in report["knobs"]["lr_scale"]["evidence"][0]
    assert report["sites"]["optimizer"]["lr"] == pytest.approx(
        0.1
    )  # the script's own rate is recorded


def _rates_per_step(
    opt: torch.optim.Optimizer, model: nn.Module, steps: int, sched: Any = None
) -> tuple[list[float], list[float]]:
    """The rate each step ran with (a hook registered after the injection's), and the group's rate after it."""
    during: list[float] = []
    after: list[float] = []
    opt.register_step_pre_hook(lambda o, a, k: during.append(o.param_groups[0]["lr"]))
    x, y = _data(8).tensors
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        after.append(opt.param_groups[0]["lr"])
        if sched is not None:
            sched.step()
    return during, after


def test_warm_up_ramps_from_the_scripts_rate_to_the_scaled_one(injected: Any) -> None:
    inj = injected({"lr_scale": 8.0, "warmup_steps": 4})
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    during, after = _rates_per_step(opt, model, 6)
    assert during == pytest.approx([0.1, 0.275, 0.45, 0.625, 0.8, 0.8])  # 0.1 + (0.8 - 0.1) * n / 4
    assert after == pytest.approx([0.8] * 6)  # between steps the group holds the scaled rate
    assert inj.finish()["knobs"]["warmup_steps"]["acted"]


def test_warm_up_ramps_a_users_scheduler_instead_of_replacing_it(injected: Any) -> None:
    injected({"lr_scale": 8.0, "warmup_steps": 4})
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    during, _ = _rates_per_step(opt, model, 6, sched)
    schedule = [0.8, 0.8, 0.4, 0.4, 0.2, 0.2]
    ramp = [(1 + 7 * min(1, n / 4)) / 8 for n in range(6)]
    assert during == pytest.approx([s * r for s, r in zip(schedule, ramp)])


def test_warm_up_without_a_scaled_rate_is_refused(injected: Any) -> None:
    inj = injected({"warmup_steps": 4})
    knob = inj.finish()["knobs"]["warmup_steps"]
    assert not knob["acted"] and "not scaled" in knob["why"]


def _train(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    clear: str = "optimizer",
) -> None:
    for x, y in batches:
        if clear == "optimizer":
            opt.zero_grad()
        elif clear == "model":
            model.zero_grad()
        elif clear == "model_in_place":
            model.zero_grad(set_to_none=False)
        elif clear == "none":
            for p in model.parameters():
                p.grad = None
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def test_accumulation_steps_once_per_k_calls_like_one_large_batch(injected: Any) -> None:
    x, y = _data(64).tensors
    torch.manual_seed(1)
    reference = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    model.load_state_dict(reference.state_dict())
    big = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    _train(reference, big, [(x[:32], y[:32]), (x[32:], y[32:])])  # two steps on batches of 32

    skipped: list[Any] = []
    inj = injected({"grad_accum": 4}, on_skipped_step=skipped.append)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    real: list[int] = []
    opt.register_step_post_hook(lambda o, a, k: real.append(1))
    _train(
        model, opt, [(x[i : i + 8], y[i : i + 8]) for i in range(0, 64, 8)]
    )  # eight micro-batches of 8
    assert len(real) == 2 and len(skipped) == 6 and all(s is opt for s in skipped)
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
    knob = inj.finish()["knobs"]["grad_accum"]
    assert knob["acted"] and "one real step per 4 calls" in knob["evidence"][0]


def test_each_call_of_step_stays_one_of_the_scripts_steps() -> None:
    steps: list[Any] = []
    detector = StepDetector(lambda loss, samples: steps.append(loss))
    inj = Injector({"grad_accum": 4}, device="cpu", on_skipped_step=detector.count_step)
    inj.install()
    detector.install()
    try:
        model = nn.Linear(6, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = _data(64).tensors
        _train(model, opt, [(x[i : i + 8], y[i : i + 8]) for i in range(0, 64, 8)])
    finally:
        detector.uninstall()
        inj.uninstall()
    assert len(steps) == 8 and all(loss is not None for loss in steps)


@pytest.mark.parametrize("clear", ["model", "model_in_place", "none"])
def test_accumulation_is_not_possible_when_the_script_clears_gradients_itself(
    injected: Any, clear: str
) -> None:
    inj = injected({"grad_accum": 4})
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    real: list[int] = []
    opt.register_step_post_hook(lambda o, a, k: real.append(1))
    x, y = _data(64).tensors
    _train(model, opt, [(x[i : i + 8], y[i : i + 8]) for i in range(0, 64, 8)], clear=clear)
    knob = inj.finish()["knobs"]["grad_accum"]
    assert not knob["acted"] and "another way than the optimizer's zero_grad()" in knob["why"]
    assert "SGD at test_convergence_injection.py" in knob["why"]
    assert len(real) == 7  # found at the second micro-batch: from then on every call steps


def test_accumulation_refuses_a_closure_optimizer(injected: Any) -> None:
    inj = injected({"grad_accum": 4})
    model = nn.Linear(6, 3)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=2)
    x, y = _data(8).tensors

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    opt.step(closure)
    knob = inj.finish()["knobs"]["grad_accum"]
    assert not knob["acted"] and "closure" in knob["why"]


def test_accumulation_keeps_a_later_lr_scheduler_working(injected: Any) -> None:
    injected({"grad_accum": 2})
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(
        opt, step_size=1, gamma=0.5
    )  # wraps opt.step as torch does
    x, y = _data(8).tensors
    for _ in range(4):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**4)


def test_sgd_becomes_adamw_at_pytorchs_default_rate(injected: Any) -> None:
    inj = injected({"optimizer_swap": "adamw"})
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # the user's optimizer
    assert type(opt) is torch.optim.AdamW and opt.param_groups[0]["lr"] == pytest.approx(1e-3)
    groups = torch.optim.SGD(
        [
            {"params": [model.weight], "lr": 0.2, "weight_decay": 0.0},
            {"params": [model.bias], "momentum": 0.5, "weight_decay": 5e-4},
        ],
        lr=0.1,
    )
    assert type(groups) is torch.optim.AdamW
    assert [g["lr"] for g in groups.param_groups] == pytest.approx(
        [2e-3, 1e-3]
    )  # the groups' ratio is kept
    assert [g["weight_decay"] for g in groups.param_groups] == pytest.approx([0.0, 0.01])
    assert "momentum" not in groups.param_groups[1]

    class MySGD(torch.optim.SGD):
        pass

    assert type(MySGD(model.parameters(), lr=0.1)) is MySGD  # only torch's own SGD is swapped
    report = inj.finish()
    swap = report["knobs"]["optimizer_swap"]
    line = _line("# the user's optimizer")
    assert (
        swap["acted"]
        and f"SGD(lr=0.1) at test_convergence_injection.py:{line}" in swap["evidence"][0]
    )
    assert (
        report["sites"]["optimizer"]["type"] == "AdamW"
        and report["sites"]["optimizer"]["line"] == line
    )


def test_uninstall_gives_sgd_back() -> None:
    inj = Injector({"optimizer_swap": "adamw", "grad_accum": 2}, device="cpu")
    inj.install()
    inj.uninstall()
    assert (
        "__new__" not in torch.optim.SGD.__dict__
        and torch.optim.SGD.__init__.__module__ == "torch.optim.sgd"
    )
    opt = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    assert type(opt) is torch.optim.SGD and "step" not in vars(opt)


def test_no_sgd_to_swap_says_so(injected: Any) -> None:
    inj = injected({"optimizer_swap": "adamw"})
    torch.optim.Adam(nn.Linear(2, 2).parameters())
    knob = inj.finish()["knobs"]["optimizer_swap"]
    assert not knob["acted"] and "no torch.optim.SGD" in knob["why"]


def test_the_snapshot_is_the_report_so_far(injected: Any) -> None:
    inj = injected({"lr_scale": 2.0, "grad_accum": 4})
    torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    snap = inj.snapshot()
    assert snap["partial"] is True and snap["knobs"]["lr_scale"]["acted"]
    assert not snap["knobs"]["grad_accum"]["acted"]  # not decided yet: no step ran


def test_a_scaled_rate_the_script_overwrites_every_step_is_not_applied(injected: Any) -> None:
    """Issue 42: llm.c writes ``param_group['lr']`` from its own schedule every step; the injected × 4 was set
    once, replaced at the first step, and reported "acted". It is refused, naming the script's line."""
    inj = injected({"lr_scale": 4.0})
    model = nn.Linear(6, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4)
    x, y = _data(8).tensors
    for step in range(3):
        for group in opt.param_groups:
            group["lr"] = 6e-4 * (step + 1) / 3  # the script's own warm-up schedule
        written = sys._getframe().f_lineno - 1
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    knob = inj.finish()["knobs"]["lr_scale"]
    assert not knob["acted"] and f"test_convergence_injection.py:{written}" in knob["why"], knob


def test_a_scheduler_that_moves_the_scaled_rate_keeps_it_applied(injected: Any) -> None:
    inj = injected({"lr_scale": 4.0})
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    _rates_per_step(opt, model, 3, sched)
    assert inj.finish()["knobs"]["lr_scale"]["acted"]
