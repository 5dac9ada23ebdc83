"""The in-process training loop: build the workload, apply every spec knob, run optimizer steps.

One optimizer step = ``grad_accum_steps`` micro-batches of ``batch_size // grad_accum_steps`` samples each
(so a step always consumes ``batch_size`` samples per rank), then ``optimizer.step()``. The step's wall time
covers everything the step waits for — the DataLoader fetch included, which is what makes a data-bound run
visible — and is read after a device synchronisation.

Instrumentation is not in here: the caller passes :class:`StepHooks` (the worker's recorder, profiler and
watchdog), so the loop is the same with and without it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn

from profilers.errors import SpecError
from profilers.run import trainer_dist

from profilers.run import trainer_setup
from profilers.run.instrument import StepTimer
from profilers.run.spec import TrainingSpec
from profilers.run.trainer_data import make_loader


@dataclass(frozen=True)
class StepRecord:
    step: int
    wall_ms: float
    loss: float
    samples: int  # samples this rank trained on in the step (= batch_size)
    t_unix_ns: int  # wall-clock time at the start of the step
    data_ms: float | None = None  # time drawing the step's batches and moving them to the device (data fixes' reach)


class StepHooks(Protocol):
    def before_step(self, step: int) -> None: ...
    def after_step(self, record: StepRecord) -> None: ...


class NoHooks:
    def before_step(self, step: int) -> None:
        pass

    def after_step(self, record: StepRecord) -> None:
        pass


@dataclass
class Trainer:
    """Everything a run needs, built from a spec (see :meth:`build`); :meth:`run` trains."""

    spec: TrainingSpec
    info: trainer_dist.DistInfo
    device: torch.device
    device_name: str
    model: nn.Module
    loss_fn: Any
    optimizer: torch.optim.Optimizer
    loader: Any
    sampler: Any
    total_steps: int
    backend: str | None = None
    warnings: list[str] = field(default_factory=list)
    steps_done: int = 0
    final_loss: float | None = None

    @classmethod
    def build(cls, spec: TrainingSpec, info: trainer_dist.DistInfo | None = None) -> Trainer:
        from sample_runs import WorkloadError, get_workload  # by name: a registry the trainer looks up

        info = info or trainer_dist.DistInfo()
        trainer_dist.check_world(spec, info)
        warnings: list[str] = []
        device, device_name = trainer_setup.resolve_device(spec, info.local_rank)
        trainer_setup.apply_backend_flags(spec, device, warnings)
        backend = trainer_dist.init_process_group(spec, info, device) if info.distributed else None
        trainer_dist.check_same_spec(spec, info)
        torch.manual_seed(spec.seed)  # identical initial weights on every rank and every A/B trial
        explicit = {k: v for k, v in spec.params.items() if k != "size"}
        try:
            workload = get_workload(spec.workload)
        except WorkloadError as err:
            raise SpecError(str(err)) from None
        parts = workload.build(str(spec.params.get("size", "tiny")), explicit, spec.seed,
                                                  device.type, info.rank)
        model = trainer_setup.prepare_model(parts.model, spec, device, checkpoint_blocks=parts.checkpoint_blocks,
                                            channels_last_applies=parts.channels_last, warnings=warnings)
        if info.distributed:
            model = trainer_dist.wrap_ddp(model, spec, device, backend or "gloo")
        else:
            for knob in ("ddp_no_sync", "grad_compression"):
                if getattr(spec, knob) not in (False, "none"):
                    warnings.append(f"{knob}={getattr(spec, knob)!r} acts on DDP only; ignored with world_size=1")
        if backend == "gloo" and spec.grad_compression == "fp16":
            warnings.append("grad_compression='fp16' on gloo: gloo sums fp16 in software, usually slower than "
                            "fp32 on CPU; 'bf16' halves the bytes and is fast there")
        if spec.ddp_no_sync and spec.grad_accum_steps == 1:
            warnings.append("ddp_no_sync=True has no effect with grad_accum_steps=1 (every micro-batch syncs)")
        if spec.cache_decoded and not parts.decodes_samples:
            warnings.append(f"cache_decoded=True: {spec.workload} keeps its samples in memory already; "
                            "the cache saves no decode work")
        optimizer = trainer_setup.make_optimizer(spec, model.parameters(), device)
        model = trainer_setup.compile_model(model, spec, device, warnings)
        loader, sampler = make_loader(spec, parts.dataset, info.rank, info.world_size, device.type == "cuda")
        total = spec.steps if spec.epochs is None else spec.epochs * sampler.steps_per_epoch
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        return cls(spec=spec, info=info, device=device, device_name=device_name, model=model,
                   loss_fn=parts.loss_fn, optimizer=optimizer, loader=loader, sampler=sampler, total_steps=total,
                   backend=backend, warnings=warnings)

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        # non_blocking only helps (and is only safe) from pinned memory to a GPU.
        t = t.to(self.device, non_blocking=self.spec.pin_memory and self.device.type == "cuda")
        if self.spec.channels_last and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        return t

    def run(self, hooks: StepHooks | None = None) -> None:
        """Train ``total_steps`` optimizer steps, calling ``hooks`` around each one."""
        hooks = hooks or NoHooks()
        spec, model = self.spec, self.model
        accum = spec.grad_accum_steps
        autocast = trainer_setup.autocast_context
        scaler = trainer_setup.grad_scaler(spec, self.device)
        # the DDP model whose all-reduce may be skipped (ddp_no_sync), else None
        skippable = model if spec.ddp_no_sync and isinstance(model, torch.nn.parallel.DistributedDataParallel) else None
        timer = StepTimer(cuda=self.device.type == "cuda")
        model.train()
        epoch = 0
        while self.steps_done < self.total_steps:
            self.sampler.set_epoch(epoch)
            batches = iter(self.loader)
            for _ in range(self.sampler.steps_per_epoch):
                if self.steps_done >= self.total_steps:
                    break
                step = self.steps_done
                hooks.before_step(step)
                t_unix_ns = time.time_ns()
                timer.start()
                loss_sum = torch.zeros((), device=self.device)
                data_ns = 0
                for micro in range(accum):
                    fetch = time.perf_counter_ns()
                    x, y = next(batches)
                    x, y = self._to_device(x), self._to_device(y)
                    data_ns += time.perf_counter_ns() - fetch
                    # Skip the all-reduce on all but the last micro-batch; gradients accumulate locally.
                    last = micro == accum - 1
                    sync = skippable.no_sync() if skippable is not None and not last else contextlib.nullcontext()
                    with sync:
                        with autocast(spec, self.device):
                            loss = self.loss_fn(model(x), y)
                        scaled = loss / accum  # mean over the whole batch, as if it were one
                        (scaler.scale(scaled) if scaler is not None else scaled).backward()
                    loss_sum += loss.detach().float()
                trainer_setup.warm_up_lr(spec, self.optimizer, step)
                if scaler is not None:
                    scaler.step(self.optimizer)
                    scaler.update()
                else:
                    self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                loss_value = float((loss_sum / accum).item())
                wall_ms = timer.stop_ms()
                self.steps_done, self.final_loss = step + 1, loss_value
                hooks.after_step(StepRecord(step, wall_ms, loss_value, spec.batch_size, t_unix_ns, data_ns / 1e6))
            del batches
            epoch += 1

    def peak_device_memory_mb(self) -> float | None:
        """CUDA's max allocated memory; ``None`` on CPU (the worker reports RSS there)."""
        if self.device.type != "cuda":
            return None
        return torch.cuda.max_memory_allocated(self.device) / 2**20
