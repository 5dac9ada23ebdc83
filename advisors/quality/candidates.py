"""Changes that alter convergence, each with the rule it follows: candidates of ``optimize --to-quality``.

- **Batch × k, learning rate scaled.** Linear rule (Goyal et al. 2017, "Accurate, Large Minibatch SGD"):
  ``lr × k``; square-root rule (Krizhevsky 2014; Hoffer et al. 2017; the usual one for Adam): ``lr × √k``.
  When the scaled rate exceeds :data:`WARMUP_FACTOR` × the original, Goyal et al. ramp it up linearly over the
  first steps (5 epochs there).
- **Gradient accumulation** (when memory caps the batch): the same k × batch per optimizer step made of k
  micro-batches of the old size (``grad_accum_steps = k``), the rate scaled by the same rule. It converges
  like the large batch per step but pays k forward/backward passes per step.
- **Optimizer swap**: SGD → AdamW (``lr`` :data:`ADAMW_LR`, the PyTorch default 1e-3); an optimizer already
  AdamW gets its fused implementation (one kernel for all tensors; the per-tensor loop the findings point at).
  LAMB/LARS (layer-wise rates for very large batches) are not in PyTorch: advice only.
- **Early stopping** with patience on the metric (:mod:`advisors.quality.early_stop`): measured on the
  baseline's own curves, no new run needed.

Each is **injected at boot** into the script's own objects — a sample workload's too, which is a script
(``stepwise_agent.inject.convergence``): its ``DataLoader(batch_size=…)`` × k, its ``torch.optim`` optimizer's
rate scaled (with a warm-up), accumulation by wrapping its ``step``/``zero_grad``, SGD built as AdamW, Adam/AdamW
fused — or set by the script's own flags where they reach those calls (:mod:`advisors.experiments.quality_knobs`);
the rule and the numbers follow the optimizer its baseline run built (:mod:`advisors.quality.script_candidates`).
Where the script does not allow one (no DataLoader, no torch optimizer, gradients cleared by
``model.zero_grad()``, a closure optimizer) it is "change it yourself" with the reason, or, when that is only
seen while it runs, "not applied: why", never a measurement. LAMB/LARS stays advice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Mapping

Scaling = Literal["linear", "sqrt"]
WARMUP_FACTOR = (
    4.0  # a rate scaled beyond 4× its original wants a warm-up (Goyal et al.: k = 32 needed one)
)
ADAMW_LR = 1e-3
EARLY_STOPPING = "early_stopping"


@dataclass(frozen=True)
class Candidate:
    """One convergence change: ``patch`` (the knobs of the change), ``None`` for advice only."""

    id: str
    title: str
    rule: str
    patch: Mapping[str, Any] | None
    advice: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "rule": self.rule,
            "patch": dict(self.patch) if self.patch is not None else None,
            "advice": self.advice,
        }


def scaled_lr(lr: float, k: float, rule: Scaling) -> float:
    return lr * k if rule == "linear" else lr * math.sqrt(k)


def lamb_lars_advice() -> Candidate:
    return Candidate(
        "optimizer_lamb_lars",
        "LAMB / LARS for a large batch",
        "layer-wise trust ratios keep a very large batch (k ≥ 8) stable (You et al. 2017, 2019)",
        None,
        "not in PyTorch: change it yourself (e.g. torch_optimizer.Lamb, or timm.optim.Lamb/Lars)",
    )


def early_stopping() -> Candidate:
    return Candidate(
        EARLY_STOPPING,
        "early stopping with patience",
        "stop when the smoothed metric has not improved by 1 % for the patience (10 % of the run's "
        "points, at least 5)",
        None,
        "measured on the baseline's own curve; in your loop: keep the best value and stop after "
        "`patience` evaluations without an improvement (Lightning: EarlyStopping(monitor=..., "
        "patience=...); HF Trainer: EarlyStoppingCallback)",
    )
