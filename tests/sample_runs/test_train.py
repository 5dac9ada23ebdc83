"""The training script, in process: data order, the shared cache, every flag acting (or warned about).

``setup`` builds what ``python -m sample_runs.train`` trains with, ``train`` runs it: the same code the script runs,
called here without a subprocess."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.utils.data import DataLoader, Dataset

from sample_runs import WORKLOADS
from sample_runs.data import EpochSampler, SharedSampleCache
from sample_runs.train import Training, parse_args, setup, train
from sample_runs.train_parts import cannot_act, pick_device


def training(*argv: str) -> Training:
    return setup(parse_args(list(argv)))


# ---- data order -------------------------------------------------------------------------------------------
def _micro_batches(sampler: EpochSampler, micro: int, epochs: int) -> list[list[int]]:
    out: list[list[int]] = []
    for e in range(epochs):
        sampler.set_epoch(e)
        out += [b.tolist() for b in DataLoader(range(sampler.n), batch_size=micro, sampler=sampler)]
    return out


def test_accumulation_sees_the_same_samples_in_the_same_order() -> None:
    whole = _micro_batches(EpochSampler(100, batch_size=16, seed=3), 16, 3)
    micro = _micro_batches(EpochSampler(100, batch_size=16, seed=3), 4, 3)
    assert [i for b in whole for i in b] == [i for b in micro for i in b]
    assert (
        len(whole) == 18 and len(micro) == 72 and all(len(b) == 4 for b in micro)
    )  # 6 steps per epoch
    assert whole[:6] != whole[6:12]  # a new permutation each epoch
    assert _micro_batches(EpochSampler(100, batch_size=16, seed=4), 16, 1) != whole[:6]


def test_ranks_get_disjoint_shards() -> None:
    shards = [set(EpochSampler(64, 8, seed=0, rank=r, world_size=2)) for r in (0, 1)]
    assert not shards[0] & shards[1] and len(shards[0]) == len(shards[1]) == 32
    with pytest.raises(ValueError, match="fewer than one batch"):
        EpochSampler(10, batch_size=8, seed=0, world_size=2)


# ---- the shared decoded-sample cache -------------------------------------------------------------------------
class CountingDataset(Dataset[Any]):
    """Counts __getitem__ calls in shared memory, so calls made in DataLoader worker processes count too."""

    def __init__(self, n: int) -> None:
        self.calls = torch.zeros(n, dtype=torch.int64).share_memory_()

    def __len__(self) -> int:
        return len(self.calls)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        self.calls[i] += 1
        return torch.full((3, 2), float(i)), i % 3


@pytest.mark.parametrize("workers", [0, 2])
def test_cache_decodes_each_sample_once_across_epochs_and_workers(workers: int) -> None:
    inner = CountingDataset(24)
    cache = SharedSampleCache(inner, len(inner))
    loader = DataLoader(cache, batch_size=6, shuffle=True, num_workers=workers)
    for _ in range(3):  # non-persistent workers: a fresh set of processes every epoch
        batches = list(loader)
    assert inner.calls.tolist() == [1] * 24 and cache.filled == 24
    x, y = next(iter(DataLoader(cache, batch_size=24)))
    assert torch.equal(x[:, 0, 0], torch.arange(24.0)) and y.tolist() == [i % 3 for i in range(24)]
    assert len(batches) == 4


def test_cache_batched_path_matches_the_dataset() -> None:
    data = WORKLOADS["compute_bound"].build("tiny").dataset
    cache = SharedSampleCache(data, len(data))  # type: ignore[arg-type]
    idx = [5, 1, 5, 300]
    x, y = cache.__getitems__(idx)
    ex, ey = data.__getitems__(idx)  # type: ignore[attr-defined]
    assert (
        torch.equal(x, ex) and torch.equal(y, ey) and cache.filled == 4
    )  # index 0 is filled at creation


# ---- the loop and its flags ---------------------------------------------------------------------------------
def test_runs_its_steps_and_prints_the_loss(capsys: pytest.CaptureFixture[str]) -> None:
    losses = train(training("digits", "--steps", "12"))
    assert len(losses) == 12 and all(torch.isfinite(torch.tensor(v)) for v in losses)
    assert capsys.readouterr().out.splitlines() == [
        f"step 10/12 loss {losses[9]:.4f}",
        f"step 12/12 loss {losses[11]:.4f}",
    ]


def test_epochs_override_steps() -> None:
    t = training("digits", "--epochs", "2", "--steps", "1")  # 512 samples / 32 = 16 steps per epoch
    assert t.total_steps == 32 and len(train(t)) == 32


def test_micro_batching_trains_exactly_like_the_whole_batch() -> None:
    whole = train(training("compute_bound", "--steps", "4"))
    micro = train(training("compute_bound", "--steps", "4", "--grad-accum-steps", "4"))
    assert micro == pytest.approx(whole, rel=1e-4)
    t = training("compute_bound", "--grad-accum-steps", "4")
    assert t.loader.batch_size == 32 and len(t.loader) == 4 * t.sampler.steps_per_epoch


@pytest.mark.slow  # 1.4-1.6 s of DataLoader workers: the full suite runs it
def test_cache_and_workers_change_cost_not_data() -> None:
    plain = train(training("data_bound", "--steps", "5"))
    fixed = train(
        training(
            "data_bound",
            "--steps",
            "5",
            "--cache-decoded",
            "--num-workers",
            "2",
            "--persistent-workers",
            "--prefetch-factor",
            "2",
        )
    )
    assert fixed == pytest.approx(plain, rel=1e-5)


def test_bf16_autocast_really_runs_matmuls_in_bf16() -> None:
    t = training("compute_bound", "--precision", "bf16", "--steps", "1")
    seen: list[torch.dtype] = []
    t.model.get_submodule("1.0").register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    train(t)
    assert seen == [torch.bfloat16]


def test_optimizer_flags_reach_the_optimizer() -> None:
    t = training("digits", "--optimizer", "adamw", "--optimizer-impl", "fused", "--lr", "0.003")
    assert isinstance(t.optimizer, torch.optim.AdamW) and t.optimizer.defaults["fused"] is True
    assert t.optimizer.defaults["lr"] == 0.003
    t = training("digits", "--optimizer-impl", "foreach")
    assert isinstance(t.optimizer, torch.optim.SGD) and t.optimizer.defaults["foreach"] is True
    assert (
        t.optimizer.defaults["momentum"] == 0.9 and t.optimizer.defaults["lr"] == 0.1
    )  # digits' own rate


def _rates(t: Training) -> list[float]:
    rates: list[float] = []
    step = t.optimizer.step

    def record(*a: object, **kw: object) -> object:
        rates.append(t.optimizer.param_groups[0]["lr"])
        return step(*a, **kw)

    t.optimizer.step = record  # type: ignore[method-assign]
    train(t)
    return rates


def test_lr_warm_up_ramps_the_rate_linearly_then_holds_it() -> None:
    flags = ("digits", "--steps", "6", "--lr", "0.4")
    assert _rates(training(*flags, "--lr-warmup-steps", "4")) == pytest.approx(
        [0.1, 0.2, 0.3, 0.4, 0.4, 0.4]
    )
    assert _rates(training(*flags)) == pytest.approx([0.4] * 6)
    goyal = training(
        *flags, "--lr-warmup-steps", "4", "--lr-warmup-from", "0.1"
    )  # small batch's rate to k × it
    assert _rates(goyal) == pytest.approx([0.175, 0.25, 0.325, 0.4, 0.4, 0.4])


@pytest.mark.slow  # ~1 s of compiling: the full suite runs it
def test_compile_and_channels_last_act_on_the_model() -> None:
    t = training("resnet_small", "--compile", "--channels-last")
    assert type(t.model).__name__ == "OptimizedModule"
    conv = t.model.get_submodule("_orig_mod.stem.0")
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_flags_that_cannot_act_here_are_warned_not_hidden() -> None:
    flags = (
        "compute_bound",
        "--device",
        "cpu",
        "--tf32",
        "--cudnn-benchmark",
        "--pin-memory",
        "--cuda-graphs",
        "--channels-last",
        "--ddp-no-sync",
        "--grad-compression",
        "fp16",
        "--cache-decoded",
    )
    with pytest.warns(UserWarning) as caught:
        training(*flags)
    said = " | ".join(str(w.message) for w in caught)
    for knob in (
        "tf32",
        "cudnn_benchmark",
        "pin_memory",
        "cuda_graphs",
        "channels_last",
        "ddp_no_sync",
        "grad_compression",
        "cache_decoded",
    ):
        assert knob in said, knob
    args = parse_args(["compute_bound", "--device", "cpu"])
    assert (
        cannot_act(args, WORKLOADS["compute_bound"].build("tiny"), pick_device("cpu", 0), 1, None)
        == []
    )


# ---- DDP, on a one-rank gloo group: its reducer, buckets and comm hooks work exactly as with more ranks --------
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
    """All-reduce rounds (one per backward that syncs: its last bucket) per optimizer step of the script's loop."""
    t = training(
        "digits",
        "--steps",
        str(steps),
        "--grad-accum-steps",
        str(accum),
        *(["--ddp-no-sync"] * no_sync),
    )
    t.ddp = t.model = nn.parallel.DistributedDataParallel(t.model)  # type: ignore[assignment]  # as 2 ranks do
    calls = count_allreduces(t.ddp)
    assert len(train(t)) == steps
    return calls.count(0) // steps  # bucket 0 is reduced once per round, whatever the bucket count


def test_ddp_no_sync_all_reduces_only_the_last_micro_batch(one_rank_group: None) -> None:
    assert rounds_per_step(no_sync=False) == 4  # every micro-batch's backward syncs
    assert rounds_per_step(no_sync=True) == 1
