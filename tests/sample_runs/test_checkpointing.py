"""Every workload declares checkpoint blocks, and ``activation_checkpointing`` really recomputes them in
backward without changing the numbers (the loss after an optimizer step built on recomputed activations)."""

from __future__ import annotations

import pytest
from torch import nn

from sample_runs import WORKLOADS
from sample_runs.train import parse_args, setup, train

# In-process (one rank) and small enough to be quick; checkpointing does not depend on the rank count.
# data_bound: 16 small JPEGs instead of 48 at 384 px (encoding them was most of its time); resnet_small: 64 samples.
SMALL = {
    "memory_bound": ["--batch-size", "64", "--set-param", "samples=256"],
    "data_bound": ["--set-param", "images=16", "--set-param", "source_size=96"],
    "resnet_small": ["--set-param", "samples=64"],
}


def _inner_layer(block: nn.Module) -> nn.Module:
    """The first parameterised layer inside ``block``: recomputation calls the block's own forward directly
    (not through ``__call__``), so only the hooks of the layers inside it see the second forward."""
    return next(
        m
        for m in block.modules()
        if m is not block and any(True for _ in m.parameters(recurse=False))
    )


def _run(name: str, checkpointing: bool) -> tuple[list[int], list[float]]:
    argv = [
        name,
        "--steps",
        "2",
        *(["--activation-checkpointing"] * checkpointing),
        *SMALL.get(name, []),
    ]
    names = WORKLOADS[name].build("tiny", parse_args(argv).params).checkpoint_blocks
    assert names, f"{name} declares no checkpoint blocks"
    t = setup(parse_args(argv))
    calls = [0] * len(names)
    for i, block in enumerate(names):
        layer = _inner_layer(t.model.get_submodule(block))
        layer.register_forward_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
    return calls, train(t)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_checkpointing_recomputes_every_declared_block_and_keeps_the_loss(name: str) -> None:
    plain_calls, plain_losses = _run(name, checkpointing=False)
    ckpt_calls, ckpt_losses = _run(name, checkpointing=True)
    assert plain_calls == [2] * len(plain_calls)  # one forward per step
    assert ckpt_calls == [4] * len(ckpt_calls)  # and each again inside that step's backward
    assert ckpt_losses == pytest.approx(
        plain_losses, rel=1e-5
    )  # step 2 is trained on recomputed activations
