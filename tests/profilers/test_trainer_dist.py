"""The DDP knobs act where they claim to: ``ddp_no_sync`` skips all-reduces, ``bucket_cap_mb`` sizes the buckets.

Run in process on a one-rank gloo group (a ``HashStore``, no port, no subprocess): DDP's reducer, buckets and
comm hooks work exactly as with more ranks, so counting the hook's calls counts the all-reduces a run launches.
Also: the spec comparison that makes every node of a multi-node run train the same spec.
"""

from __future__ import annotations

from typing import Iterator

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from profilers.run import trainer_dist
from profilers.run.spec import TrainingSpec
from profilers.run.trainer import Trainer
from sample_runs import WORKLOADS


@pytest.fixture
def one_rank_group() -> Iterator[None]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def count_allreduces(ddp: nn.parallel.DistributedDataParallel) -> list[int]:
    """A comm hook that all-reduces as DDP does and records each bucket's index; returns the live record."""
    calls: list[int] = []

    def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP rejects string annotations (__future__)
        calls.append(bucket.index())
        return default_hooks.allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, hook)
    return calls


def rounds_per_step(no_sync: bool, accum: int = 4, steps: int = 3) -> int:
    """All-reduce rounds (one per backward that syncs: its last bucket) per optimizer step of a real Trainer."""
    spec = WORKLOADS["digits"].spec("tiny", steps=steps, grad_accum_steps=accum, ddp_no_sync=no_sync)
    trainer = Trainer.build(spec)
    trainer.model = trainer_dist.wrap_ddp(trainer.model, spec, trainer.device, "gloo")  # as a 2-rank build does
    calls = count_allreduces(trainer.model)
    trainer.run()
    assert trainer.steps_done == steps
    return calls.count(0) // steps  # bucket 0 is reduced once per round, whatever the bucket count


def test_ddp_no_sync_all_reduces_only_the_last_micro_batch(one_rank_group: None) -> None:
    assert rounds_per_step(no_sync=False) == 4  # every micro-batch's backward syncs
    assert rounds_per_step(no_sync=True) == 1


def test_bucket_cap_mb_sets_the_ddp_bucket_size(one_rank_group: None) -> None:
    """Eight 256 KB weights: one bucket under the default 25 MB cap, one each under a 0.25 MB cap (DDP rebuilds
    its buckets by the cap after the first backward)."""
    buckets = {}
    for cap in (0.25, 25.0):
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)])
        ddp = trainer_dist.wrap_ddp(model, TrainingSpec(workload="w", bucket_cap_mb=cap), torch.device("cpu"),
                                    "gloo")
        assert ddp.bucket_bytes_cap == int(cap * 1024 * 1024)
        calls = count_allreduces(ddp)
        for _ in range(3):
            calls.clear()
            ddp(torch.randn(4, 256)).sum().backward()
        buckets[cap] = len(calls)
    assert buckets == {0.25: 8, 25.0: 1}


def test_a_rank_with_another_spec_is_named_with_the_fields_that_differ() -> None:
    base = WORKLOADS["digits"].spec("tiny")
    same = [base.to_json()] * 3
    assert trainer_dist.spec_mismatch(same) is None
    other = base.patch(steps=7, params={"width": 16}).to_json()
    problem = trainer_dist.spec_mismatch([base.to_json(), base.to_json(), other])
    assert problem is not None and problem.startswith("rank 2 runs another spec than rank 0 (steps=10 vs 7, ")
    assert "params.width=None vs 16" in problem and "same command" in problem
