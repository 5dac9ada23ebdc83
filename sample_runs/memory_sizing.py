"""How much memory ``memory_bound`` holds at its peak, and the depth that makes a budget bind on CUDA.

On CPU the budget is checked against RSS, which glibc's heap inflates well above the live tensors, so the CPU
sizes are measured (see ``memory_bound``). On CUDA ``memory_budget_mb`` caps the caching allocator, which
counts live tensors only: the same model would fit, and the baseline would not run out of memory. There the
depth is derived instead, from this model of the live peak (checked against ``saved_tensors_hooks`` and
against the ``[memory]`` peak of a real trace in the tests): the full batch peaks at ``OVERSHOOT`` × the
budget, so half of it (``grad_accum_steps=2``) peaks near ``OVERSHOOT / 2`` × the budget and fits.
"""

from __future__ import annotations

import math


MB = 2**20
FP32 = 4
SAVED_PER_BLOCK = (
    4  # tensors of batch × width each block keeps for backward: its input, h, gelu(h), sigmoid(h)
)
BACKWARD_TRANSIENT = (
    2  # batch × width gradient buffers alive beside the saved tensors during backward
)
OVERSHOOT = 1.4  # full batch / budget on CUDA: half the batch then needs ~0.7 × the budget


def param_count(dim: int, width: int, depth: int, classes: int) -> int:
    return (dim + 1) * width + depth * (width + 1) * width + (width + 1) * classes


def saved_bytes(batch: int, dim: int, width: int, depth: int, classes: int) -> int:
    """The activations autograd keeps from forward to backward: per block :data:`SAVED_PER_BLOCK` tensors, the
    first layer's input, the head's input, the log-softmax output and the int64 targets (weights are saved as
    views of the parameters: no new memory)."""
    return batch * (FP32 * (dim + (SAVED_PER_BLOCK * depth + 1) * width + classes) + 8)


def peak_bytes(batch: int, dim: int, width: int, depth: int, classes: int) -> int:
    """Live tensors at the peak of a step: the saved activations, the backward's gradient buffers, and the
    parameters with their gradients and SGD momentum."""
    transient = batch * BACKWARD_TRANSIENT * width * FP32
    return (
        saved_bytes(batch, dim, width, depth, classes)
        + transient
        + 3 * FP32 * param_count(dim, width, depth, classes)
    )


def cuda_depth(budget_mb: float, batch: int, dim: int, width: int, classes: int) -> int:
    """The smallest depth whose full-batch peak is at least :data:`OVERSHOOT` × ``budget_mb``."""
    per_block = peak_bytes(batch, dim, width, 1, classes) - peak_bytes(
        batch, dim, width, 0, classes
    )
    rest = peak_bytes(batch, dim, width, 0, classes)
    return max(1, math.ceil((OVERSHOOT * budget_mb * MB - rest) / per_block))
