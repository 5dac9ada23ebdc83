"""The agent checks, never injects, the knobs only a script's own loop turns: backward passes per optimizer step,
checkpointing calls, ``no_sync`` contexts (:mod:`stepwise_agent.inject.loop`)."""

from __future__ import annotations

from typing import Any

import torch
import torch.utils.checkpoint

from stepwise_agent.inject import Injector


def _loop(inj: Injector, accum: int, steps: int = 4, ckpt: bool = False) -> dict[str, Any]:
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        for _ in range(accum):
            x = torch.ones(2, 4)
            # looked up at the call, as a script imported after the agent's install binds it
            out = (
                torch.utils.checkpoint.checkpoint(model, x, use_reentrant=False)
                if ckpt
                else model(x)
            )
            (out.sum() / accum).backward()
        opt.step()
        opt.zero_grad()
        inj.on_step()  # what the step detector calls at each optimizer step
    return inj.finish()["knobs"]


def test_accumulation_is_proven_by_backward_passes_per_step(injected: Any) -> None:
    knobs = _loop(injected({}, observe={"grad_accum_steps": 2}), accum=2)
    assert knobs["grad_accum_steps"]["acted"] and knobs["grad_accum_steps"]["evidence"] == [
        "set by the script's own command line or config file, not injected",
        "2 backward passes per optimizer step (median of 3 steps)",
    ]


def test_a_loop_that_does_not_accumulate_is_not_applied(injected: Any) -> None:
    knobs = _loop(injected({}, observe={"grad_accum_steps": 4}), accum=1)
    assert not knobs["grad_accum_steps"]["acted"]
    assert (
        knobs["grad_accum_steps"]["why"]
        == "1 backward pass(es) per optimizer step, not the 4 the command asks for"
    )


def test_checkpointing_is_proven_by_its_calls(injected: Any) -> None:
    seen = _loop(injected({}, observe={"activation_checkpointing": True}), accum=1, ckpt=True)
    assert seen["activation_checkpointing"]["acted"]
    none = _loop(injected({}, observe={"activation_checkpointing": True}), accum=1)
    assert (
        none["activation_checkpointing"]["why"] == "no torch.utils.checkpoint call ran in the steps"
    )


def test_no_sync_unseen_without_ddp_and_cuda_graphs_unseen_without_a_graph(injected: Any) -> None:
    knobs = _loop(injected({}, observe={"ddp_no_sync": True, "cuda_graphs": True}), accum=1)
    assert not knobs["ddp_no_sync"]["acted"] and "no_sync" in knobs["ddp_no_sync"]["why"]
    assert not knobs["cuda_graphs"]["acted"] and "no CUDA graph" in knobs["cuda_graphs"]["why"]
