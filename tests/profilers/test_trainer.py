"""The in-process trainer: data order, the shared cache, every knob acting (or warning), instrumentation parts."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.profiler import ProfilerAction
from torch.utils.data import DataLoader, Dataset

from profilers.run import instrument
from profilers.run.instrument import StepTimer, Watchdog, profiled_steps, profiler_schedule
from profilers.run.spec import TrainingSpec
from profilers.run.trainer import StepRecord, Trainer
from profilers.run.trainer_data import EpochBatchSampler, SharedSampleCache
from sample_runs import WORKLOADS


# ---- data order -------------------------------------------------------------------------------------------
def _flat(sampler: EpochBatchSampler, epochs: int) -> list[int]:
    out: list[int] = []
    for e in range(epochs):
        sampler.set_epoch(e)
        out += [i for batch in sampler for i in batch]
    return out


def test_accumulation_sees_the_same_samples_in_the_same_order() -> None:
    whole = EpochBatchSampler(100, batch_size=16, micro_batch=16, seed=3)
    micro = EpochBatchSampler(100, batch_size=16, micro_batch=4, seed=3)
    assert _flat(whole, 3) == _flat(micro, 3)
    assert whole.steps_per_epoch == 6 and len(micro) == 24 and all(len(b) == 4 for b in micro)
    whole.set_epoch(0)
    first = list(whole)
    whole.set_epoch(1)
    assert list(whole) != first  # a new permutation each epoch
    other_seed = EpochBatchSampler(100, batch_size=16, micro_batch=16, seed=4)
    assert _flat(other_seed, 1) != _flat(whole, 1)


def test_ranks_get_disjoint_shards() -> None:
    shards = [set(_flat(EpochBatchSampler(64, 8, 8, seed=0, rank=r, world_size=2), 1)) for r in (0, 1)]
    assert not shards[0] & shards[1] and len(shards[0]) == len(shards[1]) == 32
    with pytest.raises(ValueError, match="fewer than one batch"):
        EpochBatchSampler(10, batch_size=8, micro_batch=8, seed=0, world_size=2)


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
    assert torch.equal(x, ex) and torch.equal(y, ey) and cache.filled == 4  # index 0 is filled at creation


# ---- the loop and its knobs ---------------------------------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.before: list[int] = []
        self.records: list[StepRecord] = []

    def before_step(self, step: int) -> None:
        self.before.append(step)

    def after_step(self, record: StepRecord) -> None:
        self.records.append(record)


def train(spec: TrainingSpec) -> tuple[Trainer, Recorder]:
    trainer = Trainer.build(spec)
    rec = Recorder()
    trainer.run(rec)
    return trainer, rec


def test_runs_the_steps_and_reports_each_one() -> None:
    trainer, rec = train(WORKLOADS["digits"].spec("tiny", steps=5))
    assert rec.before == [0, 1, 2, 3, 4] and [r.step for r in rec.records] == rec.before
    assert all(r.wall_ms > 0 and r.samples == 32 and torch.isfinite(torch.tensor(r.loss)) for r in rec.records)
    assert trainer.steps_done == 5 and trainer.final_loss == rec.records[-1].loss


def test_epochs_override_steps() -> None:
    spec = WORKLOADS["digits"].spec("tiny", epochs=2, steps=1)  # 512 samples / 32 = 16 steps per epoch
    trainer, rec = train(spec)
    assert trainer.total_steps == 32 and len(rec.records) == 32


def test_micro_batching_trains_exactly_like_the_whole_batch() -> None:
    base = WORKLOADS["compute_bound"].spec("tiny", steps=4)
    _, whole = train(base)
    _, micro = train(base.patch(grad_accum_steps=4))
    assert [r.loss for r in micro.records] == pytest.approx([r.loss for r in whole.records], rel=1e-4)


@pytest.mark.slow  # 1.4-1.6 s of DataLoader workers: the full suite runs it
def test_cache_and_workers_change_cost_not_data() -> None:
    base = WORKLOADS["data_bound"].spec("tiny", steps=5)
    _, plain = train(base)
    _, fixed = train(base.patch(cache_decoded=True, num_workers=2, persistent_workers=True, prefetch_factor=2))
    assert [r.loss for r in fixed.records] == pytest.approx([r.loss for r in plain.records], rel=1e-5)


def test_bf16_autocast_really_runs_matmuls_in_bf16() -> None:
    trainer = Trainer.build(WORKLOADS["compute_bound"].spec("tiny", precision="bf16", steps=1))
    seen: list[torch.dtype] = []
    layer = trainer.model.get_submodule("1.0")
    layer.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    trainer.run()
    assert seen == [torch.bfloat16]


def test_activation_checkpointing_recomputes_blocks_in_backward() -> None:
    calls: list[int] = []
    for ckpt in (False, True):
        trainer = Trainer.build(WORKLOADS["memory_bound"].spec(
            "tiny", memory_budget_mb=None, batch_size=64, steps=1, activation_checkpointing=ckpt,
            params={"samples": 128, "depth": 2}))
        counter = [0]
        trainer.model.get_submodule("1.linear").register_forward_hook(lambda *a: counter.__setitem__(0, counter[0] + 1))
        trainer.run()
        calls.append(counter[0])
    assert calls == [1, 2]  # forward, then forward again inside backward


def test_optimizer_knobs_reach_the_optimizer() -> None:
    t = Trainer.build(WORKLOADS["digits"].spec("tiny", optimizer="adamw", optimizer_impl="fused", lr=0.003))
    assert isinstance(t.optimizer, torch.optim.AdamW) and t.optimizer.defaults["fused"] is True
    assert t.optimizer.defaults["lr"] == 0.003
    t = Trainer.build(WORKLOADS["digits"].spec("tiny", optimizer_impl="foreach"))
    assert isinstance(t.optimizer, torch.optim.SGD) and t.optimizer.defaults["foreach"] is True


def test_lr_warm_up_ramps_the_rate_linearly_then_holds_it() -> None:
    spec = WORKLOADS["digits"].spec("tiny", steps=6, lr=0.4, lr_warmup_steps=4)
    trainer = Trainer.build(spec)
    rates: list[float] = []
    step = trainer.optimizer.step

    def record(*a: object, **kw: object) -> object:
        rates.append(trainer.optimizer.param_groups[0]["lr"])
        return step(*a, **kw)

    trainer.optimizer.step = record  # type: ignore[method-assign]
    trainer.run()
    assert rates == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.4, 0.4])
    plain = Trainer.build(spec.patch(lr_warmup_steps=0))
    assert plain.optimizer.param_groups[0]["lr"] == 0.4
    goyal = Trainer.build(spec.patch(lr_warmup_from=0.1))  # from the small batch's rate to k × it
    rates.clear()
    step = goyal.optimizer.step
    goyal.optimizer.step = record  # type: ignore[method-assign]
    trainer = goyal
    goyal.run()
    assert rates == pytest.approx([0.175, 0.25, 0.325, 0.4, 0.4, 0.4])


@pytest.mark.slow  # ~1 s of compiling: the full suite runs it
def test_compile_and_channels_last_act_on_the_model() -> None:
    t = Trainer.build(WORKLOADS["resnet_small"].spec("tiny", compile=True, channels_last=True))
    assert type(t.model).__name__ == "OptimizedModule"
    conv = t.model.get_submodule("_orig_mod.stem.0")
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_knobs_that_cannot_act_here_are_reported_not_hidden() -> None:
    spec = WORKLOADS["compute_bound"].spec("tiny", device="cpu", tf32=True, cudnn_benchmark=True, pin_memory=True,
                                           cuda_graphs=True, channels_last=True, ddp_no_sync=True,
                                           grad_compression="fp16", cache_decoded=True)
    warnings = " | ".join(Trainer.build(spec).warnings)
    for knob in ("tf32", "cudnn_benchmark", "pin_memory", "cuda_graphs", "channels_last", "ddp_no_sync",
                 "grad_compression", "cache_decoded"):
        assert knob in warnings, knob
    assert Trainer.build(WORKLOADS["compute_bound"].spec("tiny", device="cpu")).warnings == []


# ---- instrumentation parts ----------------------------------------------------------------------------------
def test_profiled_steps_match_the_torch_schedule() -> None:
    spec = TrainingSpec(workload="digits", warmup_steps=2, profile_wait=1, profile_warmup=2, profile_active=3)
    sched = profiler_schedule(spec)
    collecting = [s for s in range(20) if sched(s) != ProfilerAction.NONE]
    assert collecting == list(profiled_steps(spec)) == [3, 4, 5, 6, 7]


def test_step_timer_uses_the_clock_and_syncs_around_the_step() -> None:
    ticks = iter([1_000_000, 4_500_000])
    syncs: list[str] = []
    timer = StepTimer(cuda=False, clock=lambda: next(ticks), sync=lambda: syncs.append("sync"))
    timer.start()
    assert timer.stop_ms() == 3.5 and syncs == ["sync", "sync"]
    with pytest.raises(RuntimeError):
        timer.stop_ms()


def test_watchdog_calls_out_memory_and_timeouts() -> None:
    events: list[tuple[str, float]] = []
    dog = Watchdog(memory_budget_mb=1, step_timeout_s=None, on_oom=lambda mb: events.append(("oom", mb)),
                   on_timeout=lambda s: events.append(("timeout", s)))
    dog.check_once()
    assert events and events[0][0] == "oom" and events[0][1] > 1
    events.clear()
    dog = Watchdog(memory_budget_mb=None, step_timeout_s=1e-6, on_oom=lambda mb: events.append(("oom", mb)),
                   on_timeout=lambda s: events.append(("timeout", s)))
    dog.check_once()
    assert events == []  # no step in flight
    dog.step_started(7)
    dog.check_once()
    assert events == [("timeout", 7)] and dog.peak_mb > 0
    dog.step_finished()


def test_watchdog_ignores_memory_while_paused_for_the_profiler() -> None:
    ooms: list[float] = []
    dog = Watchdog(memory_budget_mb=1, step_timeout_s=None, on_oom=ooms.append, on_timeout=lambda s: None)
    dog.pause_memory(True)
    dog.check_once()
    assert ooms == [] and dog.peak_mb == 0.0
    dog.pause_memory(False)
    dog.check_once()
    assert len(ooms) == 1 and dog.peak_mb > 1


def test_bare_switch() -> None:
    assert instrument.bare_requested({"STEPWISE_BARE": "1"}) and not instrument.bare_requested({})
