"""The gradient noise scale B_simple = tr(Σ)/|G|², measured inside the training process (McCandlish et al. 2018,
"An Empirical Model of Large-Batch Training", appendix A.1: the two-batch-size estimator).

The expected squared norm of a mean gradient over B samples is ``E|g_B|² = |G|² + tr(Σ)/B``. Two batch sizes,
B_small and B_big, give two such equations, solved for each unknown (:func:`two_batch`)::

    |G|²  ≈ (B_big·|g_big|² − B_small·|g_small|²) / (B_big − B_small)
    tr Σ  ≈ (|g_small|² − |g_big|²) / (1/B_small − 1/B_big)

Each estimate is unbiased but noisy (|G|² often comes out negative on one pair), so both are averaged before
dividing (:class:`EmaRatio`, or the plain mean over a run: ``advisors.quality.noise_scale``). Three ways to get a
small and a big batch, all the same estimator:

- **per micro-batch** (one process): the gradients of k micro-batches of B and their mean (B_big = k·B);
- **per rank** (DDP): each rank's own gradient before the all-reduce and the all-reduced one
  (B_big = world·B; :func:`per_rank_pair`);
- **step to step** (what :class:`NoiseScaleMeter` does in an unmodified script): each optimizer step's gradient
  (B_small = one step's batch) and the mean of ``window`` consecutive steps' gradients (B_big = window × it). The
  weights move between those steps; with a window of a few steps the drift is small next to the noise.

The meter hooks every optimizer (``register_optimizer_step_pre_hook``: the gradients as the step sees them, after
accumulation, a ``GradScaler``'s unscaling and DDP's all-reduce), keeps one running sum of the gradients (one
copy of them: the memory it costs) and per window writes one line to ``noise_scale.jsonl``: the window's
length, the mean |g_small|² and |g_big|² in units of one step's batch (the advisor multiplies by the batch size:
B_simple scales with the unit), the time spent in the hook and the wall time of the window (its overhead).
After each window :data:`GAP` steps are left alone (the cost is spread over window + gap steps).
Squared norms stay on the device until the window ends (one host sync per window). Only the standard library
and torch: this runs in the user's interpreter.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Sequence

import torch

WINDOW = 4  # optimizer steps per big batch
GAP = 4  # steps left alone after each window: the meter works on half the steps, half its cost
ALPHA = 0.1  # EMA weight of each new pair
FILE = "noise_scale.jsonl"
ENV = "STEPWISE_NOISE_SCALE"  # "1": the launcher asked for the meter


def two_batch(b_small: float, sq_small: float, b_big: float, sq_big: float) -> tuple[float, float]:
    """``(|G|², tr Σ)`` from the squared norms of a mean gradient at two batch sizes (unbiased, noisy)."""
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < b_small < b_big, got {b_small}, {b_big}")
    g2 = (b_big * sq_big - b_small * sq_small) / (b_big - b_small)
    trace = (sq_small - sq_big) / (1.0 / b_small - 1.0 / b_big)
    return g2, trace


class EmaRatio:
    """Exponential moving averages of |G|² and tr Σ, divided only when read: ``value`` = EMA(tr Σ)/EMA(|G|²)."""

    def __init__(self, alpha: float = ALPHA) -> None:
        self.alpha, self.g2, self.trace, self.count = alpha, 0.0, 0.0, 0

    def update(self, g2: float, trace: float) -> None:
        a = 1.0 if self.count == 0 else self.alpha
        self.g2 += a * (g2 - self.g2)
        self.trace += a * (trace - self.trace)
        self.count += 1

    @property
    def value(self) -> float | None:
        return self.trace / self.g2 if self.count and self.g2 > 0 else None


def squared_norm(grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """Σ over tensors of their squared L2 norms, as a 0-d float tensor on the gradients' device."""
    if not grads:
        return torch.zeros(())
    norms = (
        torch._foreach_norm([g.detach().float() for g in grads])
        if hasattr(torch, "_foreach_norm")
        else [torch.linalg.vector_norm(g.detach().float()) for g in grads]
    )
    return torch.stack([n.to(grads[0].device) for n in norms]).pow(2).sum()


def micro_batch_pair(micro_grads: Sequence[Sequence[torch.Tensor]]) -> tuple[float, float]:
    """Per micro-batch: the mean of the micro-batches' squared norms and the squared norm of their mean."""
    k = len(micro_grads)
    small = sum(float(squared_norm(g)) for g in micro_grads) / k
    mean = [sum(parts) / k for parts in zip(*micro_grads)]
    return small, float(squared_norm(mean))


def per_rank_pair(local: Sequence[torch.Tensor], group: Any = None) -> tuple[float, float]:
    """Per rank (inside a ``torch.distributed`` process group): the ranks' mean squared norm of their own gradient
    and the squared norm of the all-reduced (averaged) one. Collective: every rank must call it."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    small = squared_norm(local).reshape(1).clone()
    dist.all_reduce(small, group=group)
    averaged = [g.detach().clone() for g in local]
    for g in averaged:
        dist.all_reduce(g, group=group)
        g.div_(world)
    return float(small) / world, float(squared_norm(averaged))


class NoiseScaleMeter:
    """The step-to-step estimator on every optimizer (see the module docs); writes ``RUN_DIR/noise_scale.jsonl``."""

    def __init__(self, path: Path | None, window: int = WINDOW, gap: int = GAP) -> None:
        if window < 2 or gap < 0:
            raise ValueError("a window needs at least 2 steps, and the gap cannot be negative")
        self.path, self.window, self.gap, self.skip = path, window, gap, 0
        self.sum: list[torch.Tensor] | None = (
            None  # the window's running sum (kept between windows: no new memory)
        )
        self.open = False
        self.shapes: list[tuple[int, ...]] = []
        self.small = torch.zeros(())
        self.n, self.steps, self.hook_s = 0, 0, 0.0
        self.t_start = 0.0
        self.ema = EmaRatio()
        self.rows: list[dict[str, Any]] = []
        self.handle: Any = None

    def install(self) -> bool:
        try:
            from torch.optim.optimizer import register_optimizer_step_pre_hook
        except ImportError:  # torch < 2.0: no global hooks, no measurement
            return False
        self.handle = register_optimizer_step_pre_hook(lambda opt, args, kwargs: self.on_step(opt))
        return True

    def remove(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None

    def on_step(self, opt: torch.optim.Optimizer) -> None:
        if self.skip > 0:
            self.skip -= 1
            return
        t0 = time.perf_counter()
        grads = [
            p.grad for group in opt.param_groups for p in group["params"] if p.grad is not None
        ]
        if not grads or any(g.is_sparse for g in grads):
            return
        shapes = [tuple(g.shape) for g in grads]
        if (
            self.sum is None or shapes != self.shapes
        ):  # the first window (or the gradients changed: start again)
            self.sum = [g.detach().float().clone() for g in grads]
            self.shapes, self.n, self.hook_s, self.t_start, self.open = shapes, 1, 0.0, t0, True
            self.small = squared_norm(grads)
        elif not self.open:  # a new window in the same buffers
            for buf, g in zip(self.sum, grads):
                buf.copy_(g.detach())
            self.n, self.hook_s, self.t_start, self.open = 1, 0.0, t0, True
            self.small = squared_norm(grads)
        else:
            torch._foreach_add_(self.sum, [g.detach().float() for g in grads])
            self.small = self.small + squared_norm(grads)
            self.n += 1
        self.steps += 1
        self.hook_s += time.perf_counter() - t0
        if self.n >= self.window:
            self._close(time.perf_counter())

    def _close(self, now: float) -> None:
        assert self.sum is not None
        n = self.n
        sq_small = float(self.small) / n
        sq_big = float(squared_norm(self.sum)) / (n * n)
        self.hook_s += time.perf_counter() - now
        g2, trace = two_batch(1.0, sq_small, float(n), sq_big)
        self.ema.update(g2, trace)
        # the window's wall time: from its first hook to its last (n − 1 steps) scaled to n steps
        wall = (now - self.t_start) * n / (n - 1)
        row = {
            "step": self.steps,
            "window": n,
            "gap": self.gap,
            "sq_small": sq_small,
            "sq_big": sq_big,
            "hook_s": self.hook_s,
            "wall_s": wall,
            "b_simple_steps_ema": self.ema.value,
        }
        self.rows.append(row)
        self.open, self.skip = False, self.gap
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")


def install_if_asked(run_dir: Path, rank: int = 0) -> NoiseScaleMeter | None:
    """The meter, installed, when the launcher set :data:`ENV` (rank 0 only: under DDP every rank's gradient is
    already the all-reduced one)."""
    if os.environ.get(ENV) != "1" or rank != 0:
        return None
    meter = NoiseScaleMeter(run_dir / FILE)
    return meter if meter.install() else None
