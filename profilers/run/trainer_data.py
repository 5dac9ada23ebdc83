"""The input pipeline of a run: a deterministic epoch batch sampler, the shared decoded-sample cache, the loader.

Order: every epoch is one seeded permutation of the dataset (``seed``, ``epoch``), sharded across ranks like
``DistributedSampler`` and cut into micro-batches. Each epoch uses a whole number of optimizer batches, so the
same samples are seen in the same order whatever ``grad_accum_steps`` is — a micro-batched run trains on
exactly the data of the run it fixes.

Cache: ``cache_decoded`` keeps each sample in shared-memory tensors the first time any process computes it.
Shared memory (not a per-process dict) matters: DataLoader workers are separate processes, and a private
cache would be lost with a non-persistent worker and split between workers that see different indices.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from profilers.run.spec import TrainingSpec


class EpochBatchSampler(Sampler[list[int]]):
    """Micro-batches of one epoch for ``rank`` of ``world_size``; call :meth:`set_epoch` before each epoch."""

    def __init__(self, n: int, batch_size: int, micro_batch: int, seed: int, rank: int = 0,
                 world_size: int = 1) -> None:
        self.n, self.batch_size, self.micro_batch = n, batch_size, micro_batch
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.epoch = 0
        per_rank = n // world_size
        self.steps_per_epoch = per_rank // batch_size
        if self.steps_per_epoch < 1:
            raise ValueError(
                f"the dataset has {n} samples ({per_rank} per rank), fewer than one batch of {batch_size}"
            )

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.steps_per_epoch * (self.batch_size // self.micro_batch)

    def __iter__(self) -> Iterator[list[int]]:
        g = torch.Generator().manual_seed(self.seed * 7919 + self.epoch)
        order = torch.randperm(self.n, generator=g)[self.rank::self.world_size]
        used = order[: self.steps_per_epoch * self.batch_size].tolist()
        for start in range(0, len(used), self.micro_batch):
            yield used[start:start + self.micro_batch]


def returns_batch(dataset: Dataset[Any]) -> bool:
    """A dataset whose ``__getitems__(indices)`` returns an already collated batch (see ``TensorPairs``)."""
    return bool(getattr(dataset, "returns_batch", False)) and hasattr(dataset, "__getitems__")


def _already_collated(batch: Any) -> Any:
    return batch


class SharedSampleCache(Dataset[Any]):
    """Wraps a dataset of fixed-shape ``(tensor | number, ...)`` samples with a cross-process memory cache."""

    def __init__(self, inner: Dataset[Any], length: int) -> None:
        self.inner = inner
        self.returns_batch = returns_batch(inner)
        first = inner[0]
        self._tuple = isinstance(first, (tuple, list))
        fields = list(first) if self._tuple else [first]
        self._slots: list[torch.Tensor] = []
        for value in fields:
            t = torch.as_tensor(value)
            self._slots.append(torch.empty((length, *t.shape), dtype=t.dtype).share_memory_())
        self._filled = torch.zeros(length, dtype=torch.bool).share_memory_()
        self._store(0, fields)

    def _store(self, i: int, fields: list[Any]) -> None:
        for slot, value in zip(self._slots, fields):
            slot[i] = torch.as_tensor(value)
        self._filled[i] = True  # set last: another process never reads a half-written sample

    def __len__(self) -> int:
        return len(self._filled)

    @property
    def filled(self) -> int:
        return int(self._filled.sum())

    def __getitem__(self, i: int) -> Any:
        if not bool(self._filled[i]):
            sample = self.inner[i]
            self._store(i, list(sample) if self._tuple else [sample])
        values = tuple(slot[i] for slot in self._slots)
        return values if self._tuple else values[0]

    def __getitems__(self, indices: list[int]) -> Any:
        """Batched access: fill the missing samples in one inner call, then gather the batch from the cache."""
        if not self.returns_batch:
            return [self[i] for i in indices]
        idx = torch.as_tensor(indices, dtype=torch.long)
        missing = idx[~self._filled[idx]]
        if len(missing):
            fresh = self.inner.__getitems__(missing.tolist())  # type: ignore[attr-defined]
            for slot, values in zip(self._slots, fresh if self._tuple else [fresh]):
                slot[missing] = values
            self._filled[missing] = True
        values = tuple(slot[idx] for slot in self._slots)
        return values if self._tuple else values[0]


def make_loader(spec: TrainingSpec, dataset: Dataset[Any], rank: int, world_size: int,
                cuda: bool) -> tuple[DataLoader[Any], EpochBatchSampler]:
    """The DataLoader with every loader knob of ``spec`` applied (``pin_memory`` only where it can act)."""
    n = len(dataset)  # type: ignore[arg-type]
    if spec.cache_decoded:
        dataset = SharedSampleCache(dataset, n)
    sampler = EpochBatchSampler(n, spec.batch_size, spec.batch_size // spec.grad_accum_steps, spec.seed,
                                rank, world_size)
    kwargs: dict[str, Any] = {}
    if spec.num_workers > 0:
        kwargs["persistent_workers"] = spec.persistent_workers
        if spec.prefetch_factor is not None:
            kwargs["prefetch_factor"] = spec.prefetch_factor
    if returns_batch(dataset):
        kwargs["collate_fn"] = _already_collated
    loader = DataLoader(dataset, batch_sampler=sampler, num_workers=spec.num_workers,
                        pin_memory=spec.pin_memory and cuda, **kwargs)
    return loader, sampler
