"""Closure optimizers: forward and backward run inside ``optimizer.step(closure)``; the agent's closure mark takes
them out of the optimizer's time, which keeps only its own update."""

from __future__ import annotations

from pathlib import Path

import pytest

from profilers.trace.breakdown import breakdown
from profilers.trace.kernel_classes import CLOSURE
from profilers.trace.load import load_trace
from stepwise_agent.inject.closure import CLOSURE_MARK
from tests.trace_factory import step, write, x


def _lbfgs_step(closure_mark: bool) -> list[dict]:
    events = [
        step(1, 0, 100),
        x("Optimizer.step#LBFGS.step", 0, 100, cat="user_annotation"),
        x("aten::linear", 5, 20),  # the closure's forward
        x("autograd::engine::evaluate_function: AddmmBackward0", 30, 40),  # its backward
        x("aten::dot", 80, 15),  # LBFGS's own two-loop recursion
    ]
    if closure_mark:
        events.append(
            x(CLOSURE_MARK, 2, 73, cat="user_annotation")
        )  # 2..75: closure() with its Python
    return events


def test_closure_time_is_forward_and_backward_not_optimizer(tmp_path: Path) -> None:
    marked = breakdown(load_trace(write(tmp_path / "m.json", _lbfgs_step(True))))
    got = {c: v / 1000 for c, v in marked.category_ns().items()}
    assert got["backward"] == pytest.approx(40) and got["forward"] == pytest.approx(
        20 + 13
    )  # ops + closure Python
    assert got["optimizer"] == pytest.approx(100 - 73)  # what is left: its own update
    unmarked = breakdown(load_trace(write(tmp_path / "u.json", _lbfgs_step(False))))
    assert (
        unmarked.category_ns()["optimizer"] == 100_000
    )  # without the mark the span swallowed the whole step


def test_the_agents_mark_is_the_one_the_trace_engine_reads() -> None:
    assert CLOSURE.match(CLOSURE_MARK)
