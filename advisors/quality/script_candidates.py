"""Convergence candidates on a user's script, injected at boot (``stepwise_agent.inject.convergence``).

A script's batch size, rate and optimizer are its own code, so the numbers are chosen from its **baseline run**:
the agent records every ``DataLoader`` and ``torch.optim`` optimizer the script built (``injected.json``: the
user's line, the batch size, the optimizer's type, first rate and ``fused``). :func:`templates` are the
candidates before the baseline has run; :func:`resolve` turns each into the concrete change with its rule and the
user's lines, or into advice ("change it yourself") saying why it cannot be injected:

- **batch × k, lr scaled** (``batch_scale`` k, ``lr_scale``): the rule follows the optimizer the script built:
  square-root for the Adam family (``lr × √k``), linear otherwise (SGD-like: ``lr × k``; Goyal et al. 2017).
  When the scaled rate is more than :data:`~advisors.quality.candidates.WARMUP_FACTOR` × the script's,
  ``warmup_steps`` ramps it linearly from the script's rate over the steps that see the baseline's first
  :data:`WARMUP_SHARE` of samples (Goyal et al.: 5 of 90 epochs).
- **gradient accumulation × k** (``grad_accum`` k, ``lr_scale`` by the same rule): needs the script to clear
  its gradients through the optimizer's ``zero_grad()`` (a closure optimizer such as LBFGS cannot: advice);
  a run where the agent saw otherwise is "not applied" (:func:`why_not_applied`), never measured.
- **the optimizer swap the run points at**: SGD → AdamW at PyTorch's default rate 1e-3 (``optimizer_swap``);
  an Adam/AdamW that is not fused → ``fused=True`` (``optimizer_impl``, the step-time knob). LAMB/LARS stay
  advice (not in PyTorch).
- **early stopping**: measured on the baseline's own curves, as on a workload.

With a Hugging Face ``Trainer`` the same knobs set ``TrainingArguments``' own fields; with Lightning the
DataLoader and the optimizer are the user's (``train_dataloader``, ``configure_optimizers``) and accumulation is
``L.Trainer(accumulate_grad_batches=…)``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from advisors.quality.candidates import (
    ADAMW_LR,
    WARMUP_FACTOR,
    Candidate,
    Scaling,
    early_stopping,
    lamb_lars_advice,
    scaled_lr,
)
from profilers.run.script_spec import CONVERGENCE_KNOBS

K = 4
WARMUP_SHARE = 0.05
BATCH, ACCUM, SWAP = "batch", "grad_accum", "optimizer_swap"
#: optimizers that step with a closure (their own forward and backward): no micro-batches to add up
CLOSURE_OPTIMIZERS = ("LBFGS",)
FUSABLE = ("Adam", "AdamW")


def templates(k: int = K) -> list[Candidate]:
    """The script candidates before the baseline has run (``patch`` names the kind; :func:`resolve` fills it)."""
    return [
        Candidate(
            f"batch_x{k}_lr",
            f"batch × {k}, lr scaled",
            f"linear rule for SGD-like optimizers (lr × {k}), "
            f"square-root for the Adam family (lr × {math.sqrt(k):g}); a warm-up when the rate grows more "
            f"than {WARMUP_FACTOR:g}×",
            {"kind": BATCH, "k": k},
        ),
        Candidate(
            f"grad_accum_x{k}",
            f"gradient accumulation × {k}",
            f"the optimizer steps every {k} backward "
            "passes, gradients divided by k, lr scaled as for the batch",
            {"kind": ACCUM, "k": k},
        ),
        Candidate(
            "optimizer_swap",
            "the optimizer swap the run points at",
            "SGD → AdamW (lr 1e-3); Adam/AdamW → fused",
            {"kind": SWAP},
        ),
        lamb_lars_advice(),
        early_stopping(),
    ]


@dataclass(frozen=True)
class Baseline:
    """What the baseline run's ``injected.json`` says about the script (each site: file, line, code, …)."""

    optimizer: Mapping[str, Any] | None
    loader: Mapping[str, Any] | None  # the training DataLoader's site, with its batch_size
    switch: (
        Mapping[str, Any] | None
    )  # the framework's switch the user called (TrainingArguments, L.Trainer)
    framework: str | None
    steps: int  # the baseline's steps (median over its seeds)
    config: Mapping[str, Any] = field(
        default_factory=dict
    )  # how the script is configured (its own knobs)

    @property
    def batch(self) -> int | None:
        size = (self.loader or {}).get("batch_size")
        return size if isinstance(size, int) else None


def read_baseline(runs: Sequence[Any]) -> Baseline | None:
    """From the first baseline run that left an ``injected.json``; ``None`` when none did."""
    from profilers.store.files import read_json

    for run in runs:
        data = read_json(Path(run.run_dir) / "injected.json") if run.run_dir else None
        if not isinstance(data, dict):
            continue
        sites, frameworks = data.get("sites") or {}, data.get("frameworks") or {}
        framework = next(iter(frameworks), None)
        switch = sites.get("training_arguments") or sites.get("lightning_trainer")
        loader = dict(sites["dataloader"]) if sites.get("dataloader") else None
        if loader is not None and isinstance((data.get("loader") or {}).get("batch_size"), int):
            loader["batch_size"] = data["loader"][
                "batch_size"
            ]  # the training loader's, as it trained
        steps = sorted(r.curve.steps[-1] + 1 for r in runs if len(r.curve))
        return Baseline(
            sites.get("optimizer"),
            loader,
            switch,
            framework,
            steps[len(steps) // 2] if steps else 0,
            data.get("config") or {},
        )
    return None


def rule_for(optimizer: str) -> Scaling:
    """Square-root for the Adam family (Adam, AdamW, NAdam, RAdam, Adamax), linear for SGD-like optimizers."""
    return "sqrt" if "adam" in optimizer.lower() else "linear"


def where(site: Mapping[str, Any] | None) -> str:
    return f"{os.path.basename(str(site['file']))}:{site['line']}" if site else "?"


#: a convergence candidate that is the same change as a step-time fix of the registry (advisors.fixes): with
#: ``--fix`` naming that fix it is judged once, in the fix's round (on llm.c both ran: 1.13× and 1.16×, one change)
SAME_AS_FIX = {"optimizer_fused": "fused_optimizer"}


def same_as_fix(cand: Candidate, forced: Sequence[str]) -> Candidate:
    """``cand``, or, when it is the same change as a fix ``--fix`` asked for, no run: the fix's round judges it."""
    fix = SAME_AS_FIX.get(cand.id)
    if fix is None or fix not in forced:
        return cand
    return replace(
        cand, patch=None, advice=f"the same change as --fix {fix}: judged once, in that fix's round"
    )


def _advice(cand: Candidate, why: str) -> Candidate:
    return replace(cand, patch=None, advice=f"change it yourself: {why}")


def resolve(cand: Candidate, base: Baseline | None) -> Candidate:
    """The concrete candidate for this script (see the module docs); others pass through."""
    kind = (cand.patch or {}).get("kind")
    if kind is None:
        return cand
    if base is None:
        return _advice(
            cand, "the baseline run left no record of the script's DataLoader and optimizer"
        )
    opt = base.optimizer
    if opt is None:
        return _advice(
            cand,
            "no torch.optim optimizer was seen in the baseline run (the script updates its "
            "weights itself)",
        )
    name, lr = str(opt.get("type")), opt.get("lr")
    if kind == SWAP:
        return _swap(cand, opt, name, lr)
    k = int(cand.patch["k"])  # type: ignore[index]
    if kind == ACCUM and name in CLOSURE_OPTIMIZERS:
        return _advice(
            cand,
            f"{name} at {where(opt)} steps with a closure (its own forward and backward): there "
            "are no micro-batches to add up",
        )
    rule = rule_for(name)
    scale = scaled_lr(1.0, k, rule)
    how = f"{rule} rule for {name}: lr × {'k' if rule == 'linear' else '√k'}, k = {k}"
    rate = (
        f"{name} lr {lr:g} → {lr * scale:g} at {where(opt)}"
        if isinstance(lr, (int, float))
        else f"{name} lr × {scale:g} at {where(opt)}"
    )
    at = (
        where(base.switch)
        if base.framework == "transformers" and base.switch
        else where(base.loader)
    )
    batch = base.batch
    if kind == BATCH:
        if batch is None and base.framework != "transformers":
            return _advice(
                cand,
                "no DataLoader(batch_size=…) was seen in the baseline run: set the batch size "
                "where the script makes its batches, and the rate by the rule",
            )
        knobs: dict[str, Any] = {"batch_scale": k, "lr_scale": scale}
        text = f"batch {batch} → {batch * k if batch else '× ' + str(k)} at {at}; {rate} ({how})"
        if scale > WARMUP_FACTOR:
            knobs["warmup_steps"] = max(1, round(WARMUP_SHARE * base.steps / k))
            text += (
                f"; the rate grows {scale:g}× (> {WARMUP_FACTOR:g}×): linear warm-up from the script's rate "
                f"over the first {knobs['warmup_steps']} steps (Goyal et al.)"
            )
        return replace(
            cand,
            id=f"batch_x{k}_{rule}_lr",
            title=f"batch × {k}, {rule} lr scaling",
            rule=text,
            patch=knobs,
        )
    knobs = {"grad_accum": k, "lr_scale": scale}
    size = f"{batch}" if batch else "the script's batch"
    text = (
        f"{k} micro-batches of {size} per optimizer step ({name} at {where(opt)} steps every {k}th call, "
        f"gradients / {k}); {rate} ({how}): the large batch's convergence at the small batch's memory"
    )
    return replace(
        cand,
        id=f"grad_accum_x{k}_{rule}_lr",
        title=f"gradient accumulation × {k}",
        rule=text,
        patch=knobs,
    )


def _swap(cand: Candidate, opt: Mapping[str, Any], name: str, lr: Any) -> Candidate:
    if name == "SGD":
        rate = f" (lr {lr:g})" if isinstance(lr, (int, float)) else ""
        return replace(
            cand,
            id="optimizer_adamw",
            title="SGD → AdamW",
            rule=f"SGD{rate} at {where(opt)} → AdamW "
            f"at lr {ADAMW_LR:g} (PyTorch's default): adaptive per-parameter steps",
            patch={"optimizer_swap": "adamw"},
        )
    if name in FUSABLE and not opt.get("fused"):
        return replace(
            cand,
            id="optimizer_fused",
            title=f"fused {name}",
            rule=f"{name} at {where(opt)} with "
            "fused=True: one kernel for all parameters instead of a loop per tensor (the same update)",
            patch={"optimizer_impl": "fused"},
        )
    why = (
        f"{name} at {where(opt)} is already fused"
        if opt.get("fused")
        else f"no swap is known to help {name} (at {where(opt)})"
    )
    return _advice(cand, why)


def asked(cand: Candidate, injected: Mapping[str, Any] | None) -> list[str]:
    """The knobs a candidate's run had to act on: the candidate's, or, for an arm run as the user's own command
    with its flags changed (``observed``: :mod:`advisors.experiments.quality_knobs`), the values that command asks
    for, checked by the agent."""
    if (injected or {}).get("observed"):
        return [k for k in (injected or {}).get("knobs") or {} if k in CONVERGENCE_KNOBS]
    return [k for k in (cand.patch or {}) if k in CONVERGENCE_KNOBS or k == "optimizer_impl"]


def why_not_applied(cand: Candidate, injected: Mapping[str, Any] | None) -> str | None:
    """From a candidate run's ``injected.json``: why one of the candidate's knobs did not act, else ``None``."""
    knobs = asked(cand, injected)
    if not knobs:
        return None
    if injected is None:
        return "the run left no record of what was injected"
    for knob in knobs:
        rec = (injected.get("knobs") or {}).get(knob)
        if rec is None:
            return f"the launcher has no record of {knob}"
        if not rec.get("acted"):
            return str(rec.get("why") or f"{knob}: its effect was not seen")
    return None


def applied_record(cand: Candidate, injected: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What was injected for the candidate, for the report: its knobs (value, acted, evidence, why) and the
    user's lines it acted at."""
    if injected is None or not cand.patch:
        return None
    names = [k for k in asked(cand, injected) if k in (injected.get("knobs") or {})]
    sites = injected.get("sites") or {}
    return {
        "knobs": {k: injected["knobs"][k] for k in names},
        "sites": {
            s: {f: sites[s].get(f) for f in ("file", "line", "code", "via")}
            for s in ("dataloader", "optimizer", "training_arguments", "lightning_trainer")
            if s in sites
        },
    }


def refused(injected: Mapping[str, Any] | None, inject: Mapping[str, Any]) -> str | None:
    """While a run goes on: the first convergence knob it was asked for that the agent already refused."""
    for knob in inject:
        rec = ((injected or {}).get("knobs") or {}).get(knob)
        if knob in CONVERGENCE_KNOBS and rec and rec.get("refused"):
            return str(rec.get("why"))
    return None
