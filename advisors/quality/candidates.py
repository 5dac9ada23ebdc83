"""Changes that alter convergence, each with the rule it follows: candidates of ``optimize --to-quality``.

- **Batch × k, learning rate scaled.** Linear rule (Goyal et al. 2017, "Accurate, Large Minibatch SGD"):
  ``lr × k``; square-root rule (Krizhevsky 2014; Hoffer et al. 2017; the usual one for Adam): ``lr × √k``.
  When the scaled rate exceeds :data:`WARMUP_FACTOR` × the original, Goyal et al. ramp it up linearly over the
  first steps (5 epochs there); a sample workload's trainer has no warm-up knob, so the candidate says so
  ("add a warm-up yourself") instead of pretending it ran one.
- **Gradient accumulation** (when memory caps the batch): the same k × batch per optimizer step made of k
  micro-batches of the old size (``grad_accum_steps = k``), the rate scaled by the same rule. It converges
  like the large batch per step but pays k forward/backward passes per step.
- **Optimizer swap**: SGD → AdamW (``lr`` :data:`ADAMW_LR`, the PyTorch default 1e-3); an optimizer already
  AdamW gets its fused implementation (one kernel for all tensors; the per-tensor loop the findings point at).
  LAMB/LARS (layer-wise rates for very large batches) are not in PyTorch: advice only.
- **Early stopping** with patience on the metric (:mod:`advisors.quality.early_stop`): measured on the
  baseline's own curves, no new run needed.

On a sample workload each is a :class:`~profilers.run.spec.TrainingSpec` patch. On a script they are
**injected at boot** into the script's own objects (``stepwise_agent.inject.convergence``): its
``DataLoader(batch_size=…)`` × k, its ``torch.optim`` optimizer's rate scaled (with the warm-up the workload's
trainer lacks), accumulation by wrapping its ``step``/``zero_grad``, SGD built as AdamW, Adam/AdamW fused;
the rule and the numbers follow the optimizer its baseline run built (:mod:`advisors.quality.script_candidates`,
whose ``templates`` are a script's candidates before its baseline has run; it imports this module, never the
other way).
Where the script does not allow one (no DataLoader, no torch optimizer, gradients cleared by
``model.zero_grad()``, a closure optimizer) it is "change it yourself" with the reason, or, when that is only
seen while it runs, "not applied: why", never a measurement. LAMB/LARS stays advice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from profilers.run.spec import TrainingSpec

Scaling = Literal["linear", "sqrt"]
WARMUP_FACTOR = 4.0  # a rate scaled beyond 4× its original wants a warm-up (Goyal et al.: k = 32 needed one)
WARMUP_SHARE, MIN_WARMUP = 0.1, 5  # the warm-up's length: a tenth of the run's optimizer steps, at least 5
ADAMW_LR = 1e-3
EARLY_STOPPING = "early_stopping"


@dataclass(frozen=True)
class Candidate:
    """One convergence change: ``patch`` (TrainingSpec fields) for a workload, ``None`` for advice only."""

    id: str
    title: str
    rule: str
    patch: Mapping[str, Any] | None
    advice: str = ""

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "rule": self.rule,
                "patch": dict(self.patch) if self.patch is not None else None, "advice": self.advice}


def scaled_lr(lr: float, k: float, rule: Scaling) -> float:
    return lr * k if rule == "linear" else lr * math.sqrt(k)


def warmup_steps_for(run_steps: int) -> int:
    """The warm-up's length: :data:`WARMUP_SHARE` of the run's optimizer steps, at least :data:`MIN_WARMUP`."""
    return max(MIN_WARMUP, int(run_steps * WARMUP_SHARE))


def batch_scaled(spec: TrainingSpec, k: int, rule: Scaling, run_steps: int | None = None) -> Candidate:
    """Batch × k, the rate by ``rule``; beyond :data:`WARMUP_FACTOR` × the rate, the trainer ramps it up linearly
    over :func:`warmup_steps_for` of the run's steps (``run_steps``: the arm's budget, else the spec's steps)."""
    lr = scaled_lr(spec.lr, k, rule)
    warm = lr > WARMUP_FACTOR * spec.lr
    why = (f"batch {spec.batch_size} → {spec.batch_size * k}, lr {spec.lr:g} → {lr:g} ({rule} rule: lr × "
           f"{'k' if rule == 'linear' else '√k'}, k = {k})")
    patch: dict[str, Any] = {"batch_size": spec.batch_size * k, "lr": lr}
    if warm:
        w = warmup_steps_for(run_steps or spec.steps)
        patch.update(lr_warmup_steps=w, lr_warmup_from=spec.lr)
        why += (f"; the scaled rate is {lr / spec.lr:.1f}× the original (> {WARMUP_FACTOR:g}×), so it is ramped up "
                f"linearly from {spec.lr:g} over the first {w} steps ({100 * WARMUP_SHARE:g}% of the run; Goyal et al. ramped over "
                "5 of 90 epochs)")
    return Candidate(f"batch_x{k}_{rule}_lr", f"batch × {k}, {rule} lr scaling" + (", warm-up" if warm else ""),
                     why, patch)


def accumulation(spec: TrainingSpec, k: int, rule: Scaling) -> Candidate:
    lr = scaled_lr(spec.lr, k, rule)
    why = (f"{k} micro-batches of {spec.batch_size} per optimizer step (batch {spec.batch_size * k}, "
           f"grad_accum_steps = {k}), lr {spec.lr:g} → {lr:g} ({rule} rule): the large batch's convergence at "
           "the small batch's memory")
    return Candidate(f"grad_accum_x{k}_{rule}_lr", f"gradient accumulation × {k}", why,
                     {"batch_size": spec.batch_size * k, "grad_accum_steps": spec.grad_accum_steps * k, "lr": lr})


def optimizer_swap(spec: TrainingSpec) -> Candidate:
    if spec.optimizer == "sgd":
        return Candidate("optimizer_adamw", "SGD → AdamW", f"AdamW at lr {ADAMW_LR:g} (PyTorch's default) in "
                         f"place of SGD at {spec.lr:g}: adaptive per-parameter steps", {"optimizer": "adamw",
                                                                                        "lr": ADAMW_LR})
    return Candidate("optimizer_fused", f"fused {spec.optimizer}", "one fused kernel for all parameters "
                     "instead of a loop per tensor (the same update)", {"optimizer_impl": "fused"})


def lamb_lars_advice(spec: TrainingSpec | None = None) -> Candidate:
    return Candidate("optimizer_lamb_lars", "LAMB / LARS for a large batch",
                     "layer-wise trust ratios keep a very large batch (k ≥ 8) stable (You et al. 2017, 2019)", None,
                     "not in PyTorch: change it yourself (e.g. torch_optimizer.Lamb, or timm.optim.Lamb/Lars)")


def early_stopping() -> Candidate:
    return Candidate(EARLY_STOPPING, "early stopping with patience",
                     "stop when the smoothed metric has not improved by 1 % for the patience (10 % of the run's "
                     "points, at least 5)", None,
                     "measured on the baseline's own curve; in your loop: keep the best value and stop after "
                     "`patience` evaluations without an improvement (Lightning: EarlyStopping(monitor=..., "
                     "patience=...); HF Trainer: EarlyStoppingCallback)")


def for_workload(spec: TrainingSpec, k: int = 4, run_steps: int | None = None) -> list[Candidate]:
    """What ``optimize --to-quality`` tries on a sample workload, in this order (``run_steps``: the budget's)."""
    rule: Scaling = "sqrt" if spec.optimizer in ("adam", "adamw") else "linear"
    other: Scaling = "linear" if rule == "sqrt" else "sqrt"
    return [batch_scaled(spec, k, rule, run_steps), batch_scaled(spec, k, other, run_steps), accumulation(spec, k, rule),
            optimizer_swap(spec), early_stopping()]
