"""What a workload is: a named recipe that turns its parameters into a model, a dataset and a loss.

A workload owns only *what* is trained. *How* it is trained (precision, DataLoader, DDP, accumulation,
checkpointing, compile, …) is the training script's job (``python -m sample_runs.train``), so every workload
honours every knob without code of its own. The few facts the script needs from the model travel in
:class:`Parts`; the few facts a workload needs from the run (its seed, where it runs) in :class:`BuildContext`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

import torch
from torch import nn
from torch.utils.data import Dataset

from sample_runs.errors import WorkloadError

Bottleneck = Literal["data", "compute", "memory", "communication"]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Parts:
    """What the script needs. ``dataset[i]`` returns ``(input_tensor, target)`` with fixed shapes."""

    model: nn.Module
    dataset: Dataset[Any]
    loss_fn: LossFn
    checkpoint_blocks: tuple[
        str, ...
    ] = ()  # submodule names the script wraps in torch.utils.checkpoint
    channels_last: bool = (
        False  # the model has 4-D (N, C, H, W) activations, so channels_last can act
    )
    decodes_samples: bool = False  # __getitem__ does real decode work, so cache_decoded can save it


@dataclass(frozen=True)
class BuildContext:
    """What a builder may know of the run: the seed (data and weights are deterministic from it), the device type
    it will train on (``cpu``/``cuda``) and the parameter names the command line set explicitly."""

    seed: int = 0
    device: str = "cpu"
    explicit: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Size:
    """A named scale: workload parameters plus the training settings that go with them (the script's flags'
    defaults — batch, steps, learning rate — and the launcher's: ``memory_budget_mb``, ``world_size``)."""

    params: Mapping[str, Any]
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """A registered workload. ``settings(size)`` is its recommended baseline; ``build(params, ctx)`` its parts."""

    name: str
    description: str
    intended_bottleneck: Bottleneck | None
    default_params: Mapping[str, Any]
    sizes: Mapping[str, Size]
    builder: Callable[[Mapping[str, Any], BuildContext, int], Parts]
    base_settings: Mapping[str, Any] = field(default_factory=dict)  # settings of every size

    def settings(self, size: str = "tiny") -> dict[str, Any]:
        """The recommended training settings at ``size`` (what its flags default to)."""
        return {**self.base_settings, **self._size(size).settings}

    def resolve_params(
        self, size: str = "tiny", explicit: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """defaults < the size's params < ``explicit`` ones (an unknown name is a WorkloadError)."""
        explicit = dict(explicit or {})
        unknown = sorted(set(explicit) - set(self.default_params))
        if unknown:
            raise WorkloadError(
                f"workload {self.name!r} has no parameter(s) {unknown}; its parameters are "
                f"{sorted(self.default_params)}"
            )
        return {**self.default_params, **self._size(size).params, **explicit}

    def build(
        self,
        size: str = "tiny",
        explicit: Mapping[str, Any] | None = None,
        seed: int = 0,
        device: str = "cpu",
        rank: int = 0,
    ) -> Parts:
        """Model, data and loss; deterministic from ``seed`` (the same on every rank)."""
        params = self.resolve_params(size, explicit)
        return self.builder(params, BuildContext(seed, device, frozenset(explicit or {})), rank)

    def _size(self, size: str) -> Size:
        if size not in self.sizes:
            raise WorkloadError(
                f"workload {self.name!r} has no size {size!r}; sizes: {sorted(self.sizes)}"
            )
        return self.sizes[size]


def generator(seed: int, stream: int = 0) -> torch.Generator:
    """A private torch RNG, so building data never disturbs (or depends on) the global RNG state."""
    return torch.Generator().manual_seed(seed * 1_000_003 + stream)


def cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Classification / language-model loss; flattens (B, T, V) logits so both shapes work."""
    if output.dim() == 3:
        output, target = output.reshape(-1, output.size(-1)), target.reshape(-1)
    return nn.functional.cross_entropy(output.float(), target)


class TensorPairs(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """In-memory ``(x[i], y[i])`` pairs: the dataset of workloads whose bottleneck is not the data.

    ``__getitems__`` hands the DataLoader a whole batch with one gather per tensor (``returns_batch``): indexing
    a large batch sample by sample costs milliseconds of Python and, under the profiler, thousands of events.
    """

    returns_batch = True

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if len(x) != len(y):
            raise ValueError("x and y must have the same length")
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.long)
        return self.x[idx], self.y[idx]


def teacher_classification(n: int, dim: int, classes: int, seed: int) -> TensorPairs:
    """Gaussian inputs labelled by a fixed random linear teacher: learnable, so the loss falls."""
    g = generator(seed, stream=1)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, classes, generator=g)
    y = (x @ w).argmax(dim=1)
    return TensorPairs(x, y)
