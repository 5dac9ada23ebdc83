"""``diagnose(observation) -> Diagnosis``: run every rule, rank the findings, name the binding bottleneck.

The binding bottleneck is the finding with the largest severity (share of step time at stake); ties go to
the higher confidence, then to the earlier rule in ``RULES``. Nothing firing (or only findings with no step
time at stake) is ``none``. The diagnosis' confidence is the binding finding's, lowered when a finding of
another class comes close: ``confidence × (MARGIN_FLOOR + (1 - MARGIN_FLOOR) × margin)`` with ``margin`` the
relative gap to the best finding of a different class.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from advisors.facts import Facts, derive
from advisors.fixes import FIXES
from advisors.model import Bottleneck, Diagnosis, EvidenceValue, Finding, Note
from advisors.observation import Observation
from advisors.rules import RULES, Rule

MARGIN_FLOOR = 0.6  # confidence factor when a finding of another class is exactly as severe


def diagnose(obs: Observation, rules: Sequence[type[Rule]] = RULES,
             overrides: Mapping[str, Mapping[str, float]] | None = None) -> Diagnosis:
    """Diagnose one observation. ``overrides`` maps a rule id to threshold overrides."""
    facts = derive(obs)
    instances = [r((overrides or {}).get(r.id)) for r in rules]
    order = {r.id: i for i, r in enumerate(instances)}
    findings = [f for r in instances if (f := r.evaluate(facts)) is not None]
    ranked = sorted(findings, key=lambda f: (-f.severity, -f.confidence, order[f.rule]))
    binding = ranked[0] if ranked and ranked[0].severity > 0 else None
    others = tuple(ranked[1:] if binding else ranked)
    fired = {f.bottleneck for f in findings}
    notes = _notes(instances, facts, fired, obs)
    return Diagnosis(
        bottleneck=binding.bottleneck if binding else Bottleneck.NONE,
        confidence=_confidence(binding, others),
        binding=binding, others=others, evidence=headline(facts, binding), notes=notes)


def _confidence(binding: Finding | None, others: Sequence[Finding]) -> float:
    if binding is None:
        return 0.0
    rival = max((f.severity for f in others if f.bottleneck != binding.bottleneck), default=0.0)
    margin = (binding.severity - rival) / binding.severity if binding.severity > 0 else 0.0
    return round(binding.confidence * (MARGIN_FLOOR + (1 - MARGIN_FLOOR) * margin), 4)


def _notes(rules: Sequence[Rule], facts: Facts, fired: set[Bottleneck], obs: Observation) -> tuple[Note, ...]:
    """Per class that did not fire: each distinct reason a rule of it could not judge; ``whole_class`` when
    none of its rules could."""
    notes = [Note(Bottleneck.NONE, n, whole_class=False) for n in obs.notes]
    by_class: dict[Bottleneck, list[str | None]] = {}
    for r in rules:
        by_class.setdefault(r.bottleneck, []).append(r.missing(facts))
    for cls, reasons in by_class.items():
        if cls in fired:
            continue
        whole = all(reasons)
        for reason in dict.fromkeys(x for x in reasons if x):
            notes.append(Note(cls, reason, whole_class=whole))
    return tuple(notes)


def headline(f: Facts, binding: Finding | None) -> dict[str, EvidenceValue]:
    """The few numbers a reader checks first, plus the binding finding's own evidence."""
    out: dict[str, EvidenceValue] = {"step_time_ms": round(f.step_ms, 4), "steps": f.n_steps, "ranks": f.n_ranks}
    if f.has_steps:
        out.update({"gpu_busy_share": None if f.gpu_busy is None else round(f.gpu_busy, 4),
                    "dataloader_exposed_share": round(f.loader_exposed, 4),
                    "exposed_comm_share": round(f.comm_exposed, 4),
                    "gemm_share_of_kernel_time": round(f.kernel_mix.get("matmul", 0.0), 4)})
    if f.run is not None:
        out.update({"run_status": f.run.status, "peak_memory_mb": f.run.peak_memory_mb})
    if binding is not None:
        out.update(binding.evidence)
    return out


def finding_json(f: Finding) -> dict[str, Any]:
    fix = FIXES.get(f.fix_id) if f.fix_id else None
    return {"rule": f.rule, "name": f.name, "bottleneck": f.bottleneck.value, "severity": f.severity,
            "confidence": f.confidence, "message": f.message, "evidence": dict(f.evidence),
            "fix": fix.to_json() if fix else None}


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    """The advisor half of ``analyze --json``: bottleneck, confidence, findings (binding first), notes."""
    return {"bottleneck": d.bottleneck.value, "confidence": d.confidence,
            "findings": [finding_json(f) for f in d.findings], "evidence": dict(d.evidence),
            "not_enough_data": [{"bottleneck": n.bottleneck.value, "reason": n.reason, "whole_class": n.whole_class}
                                for n in d.notes]}
