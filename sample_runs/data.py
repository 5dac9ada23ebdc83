"""The input pipeline's own parts: a deterministic epoch sampler, and a decoded-sample cache shared across processes.

Order: every epoch is one seeded permutation of the dataset (``seed``, ``epoch``), sharded across ranks like
``DistributedSampler`` and cut to a whole number of optimizer batches, so the same samples are seen in the same
order whatever the number of micro-batches per step is: a micro-batched run trains on exactly the data of the run
it fixes (the DataLoader cuts the sampler's indices into micro-batches).

Cache: ``--cache-decoded`` keeps each sample in shared-memory tensors the first time any process computes it.
Shared memory (not a per-process dict) matters: DataLoader workers are separate processes, and a private
cache would be lost with a non-persistent worker and split between workers that see different indices.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch
from torch.utils.data import Dataset, Sampler


class EpochSampler(Sampler[int]):
    """The indices of one epoch for ``rank`` of ``world_size``, a whole number of ``batch_size`` batches; call
    :meth:`set_epoch` before each epoch."""

    def __init__(
        self, n: int, batch_size: int, seed: int, rank: int = 0, world_size: int = 1
    ) -> None:
        self.n, self.batch_size, self.seed, self.rank, self.world_size = (
            n,
            batch_size,
            seed,
            rank,
            world_size,
        )
        self.epoch = 0
        per_rank = n // world_size
        self.steps_per_epoch = per_rank // batch_size
        if self.steps_per_epoch < 1:
            raise ValueError(
                f"the dataset has {n} samples ({per_rank} per rank), fewer than one batch of "
                f"{batch_size}"
            )

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.steps_per_epoch * self.batch_size

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed * 7919 + self.epoch)
        order = torch.randperm(self.n, generator=g)[self.rank :: self.world_size]
        return iter(order[: len(self)].tolist())


def returns_batch(dataset: Dataset[Any]) -> bool:
    """A dataset whose ``__getitems__(indices)`` returns an already collated batch (``sample_runs.base.TensorPairs``)."""
    return bool(getattr(dataset, "returns_batch", False)) and hasattr(dataset, "__getitems__")


def already_collated(batch: Any) -> Any:
    """The ``collate_fn`` of a dataset that :func:`returns_batch`: the batch is whole already."""
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
