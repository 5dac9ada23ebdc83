"""``diagnose(observation) -> Diagnosis``: run every rule, group and settle the findings, name the binding bottleneck.

Rules that see the same time become one finding (the most severe leads, the others are listed in
``related``); each finding then claims its severity from its region of the step, at most what is left there
(:mod:`advisors.accounting`), so severities never double count. The binding bottleneck is the finding with the
largest settled severity (share of step time at stake); ties go to the higher confidence, then to the earlier
rule in ``RULES``. A binding finding must hold a real share of the step: when none holds
:data:`~advisors.rules.base.MIN_BINDING_SHARE` (0.2), a *fallback* rule's finding is weighed too (COMP007: the
device's own work fills at least half the step, so the verdict is compute with its own evidence and fix order,
the small findings minor ones) and kept only when it binds; otherwise fallbacks are left out, so they never move
a verdict a real finding makes. Nothing firing (or only findings with no step time at stake) is ``none``. The
diagnosis'
confidence is the binding finding's, lowered when a finding of another class comes close:
``confidence × (MARGIN_FLOOR + (1 - MARGIN_FLOOR) × margin)`` with ``margin`` the relative gap to the best
finding of a different class.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from advisors.accounting import group, regions, settle
from advisors.bounds import Bound
from advisors.facts import Facts, derive
from advisors.fixes import FIXES, fix_bounds, snippets_here
from advisors.verdict import Bottleneck, Diagnosis, EvidenceValue, Finding, Note
from advisors.observation import Observation
from advisors.ranking import rank, ranking_json
from advisors.rules import RULES, Rule
from advisors.rules.base import MIN_BINDING_SHARE
from advisors.rules.data.saturated_host import contention_note

MARGIN_FLOOR = 0.6  # confidence factor when a finding of another class is exactly as severe


def diagnose(
    obs: Observation,
    rules: Sequence[type[Rule]] = RULES,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
) -> Diagnosis:
    """Diagnose one observation. ``overrides`` maps a rule id to threshold overrides."""
    facts = derive(obs)
    instances = [r((overrides or {}).get(r.id)) for r in rules]
    order = {r.id: i for i, r in enumerate(instances)}
    causes = {r.id: r.cause for r in instances}
    findings = [f for r in instances if (f := r.evaluate(facts)) is not None]
    ranked = _ranked(findings, {r.id for r in instances if r.fallback}, causes, facts, order)
    binding = ranked[0] if ranked and ranked[0].severity > 0 else None
    others = tuple(ranked[1:] if binding else ranked)
    fired = {f.bottleneck for f in findings}
    notes = _notes(instances, facts, fired, obs)
    return Diagnosis(
        bottleneck=binding.bottleneck if binding else Bottleneck.NONE,
        confidence=_confidence(binding, others),
        binding=binding,
        others=others,
        evidence=headline(facts, binding),
        notes=notes,
        regions=regions(facts),
        bounds=fix_bounds(facts),
        snippets=snippets_here(facts),
    )


def _ranked(
    findings: Sequence[Finding],
    fallbacks: set[str],
    causes: Mapping[str, str],
    facts: Facts,
    order: Mapping[str, int],
) -> list[Finding]:
    """The settled findings, binding first: without the fallback rules' findings, unless no finding holds
    MIN_BINDING_SHARE of the step and a fallback then binds (see the module docs)."""
    main = [f for f in findings if f.rule not in fallbacks]
    ranked = settle(group(main, causes, order), causes, facts, order)
    if len(main) == len(findings) or (ranked and ranked[0].severity >= MIN_BINDING_SHARE):
        return ranked
    weighed = settle(group(findings, causes, order), causes, facts, order)
    return weighed if weighed and weighed[0].rule in fallbacks else ranked


def _confidence(binding: Finding | None, others: Sequence[Finding]) -> float:
    if binding is None:
        return 0.0
    rival = max((f.severity for f in others if f.bottleneck != binding.bottleneck), default=0.0)
    margin = (binding.severity - rival) / binding.severity if binding.severity > 0 else 0.0
    return round(binding.confidence * (MARGIN_FLOOR + (1 - MARGIN_FLOOR) * margin), 4)


def _notes(
    rules: Sequence[Rule], facts: Facts, fired: set[Bottleneck], obs: Observation
) -> tuple[Note, ...]:
    """Per class that did not fire: each distinct reason a rule of it could not judge; ``whole_class`` when
    none of its rules could."""
    notes = [Note(Bottleneck.NONE, n, whole_class=False) for n in obs.notes]
    contended = contention_note(
        facts.telemetry
    )  # other programs' load is said, never read as the run's
    if contended:
        notes.append(Note(Bottleneck.NONE, contended, whole_class=False))
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
    # the run's one step time (its time per step) when it has one; the profiled window's beside it
    run_ms = f.run.step_time_ms if f.run is not None else None
    out: dict[str, EvidenceValue] = {
        "step_time_ms": round(run_ms if run_ms is not None else f.step_ms, 4),
        "profiled_step_time_ms": round(f.step_ms, 4) if f.has_steps else None,
        "steps": f.n_steps,
        "ranks": f.n_ranks,
    }
    if f.has_steps:
        out.update(
            {
                "gpu_busy_share": None if f.gpu_busy is None else round(f.gpu_busy, 4),
                "dataloader_exposed_share": round(f.loader_exposed, 4),
                "exposed_comm_share": round(f.comm_exposed, 4),
                "gemm_share_of_kernel_time": round(f.kernel_mix.get("matmul", 0.0), 4),
            }
        )
        if (
            f.device_peak is not None
        ):  # TF32 exists from Ampere on: the ladder never tries it on an older GPU
            out["tf32_available"] = f.device_peak.ampere_or_newer
        if (
            f.cpu_bf16_fast is not None
        ):  # bf16 is a fix on this CPU only when its matmuls beat fp32 there
            out["cpu_bf16_fast"] = f.cpu_bf16_fast
        if (
            f.efficiency is not None
        ):  # achieved FLOP/s against the device's peak (or why it is unknown)
            out.update(
                {
                    "mfu": None if f.mfu is None else round(f.mfu, 6),  # its sentence's MFU
                    "efficiency": f.efficiency.phrase(),
                }
            )
    if f.run is not None:
        out.update({"run_status": f.run.status, "peak_memory_mb": f.run.peak_memory_mb})
    if binding is not None:
        out.update(binding.evidence)
    return out


def _claim(f: Finding, lever: str = "") -> Bound | None:
    """A finding's own bound: all of the time it claims vanishing (``None`` when its severity is not step time)."""
    if f.upper_bound_speedup is None:
        return None
    what = (
        f"if the {f.bottleneck.value} time this finding claims ({f.stake:.0%} of the step) vanished"
        if not lever
        else f"if the {f.bottleneck.value} time this fix is another lever on ({f.stake:.0%} of the step) vanished"
    )
    return Bound(f.fix_id or "", f.stake, f.upper_bound_speedup, what)


def _pick(own: Bound | None, claimed: Bound | None) -> Bound | None:
    """A fix's own bound (the time it can touch) where it reaches less than the finding's time, or where it is
    measured more directly (``replaces``: the data fixes' unprofiled batch-drawing time), else the finding's."""
    if own is not None and (
        own.replaces
        or claimed is None
        or (own.speedup is not None and (claimed.speedup is None or own.speedup < claimed.speedup))
    ):
        return own
    return claimed


def bound_of(d: Diagnosis, f: Finding) -> Bound | None:
    """The upper bound on what finding ``f``'s fix can gain (:func:`_pick` of the fix's own bound and the
    finding's): the one number the Diagnosis, ``analyze --json`` (``upper_bound_speedup``), an Apply and a ladder
    round show for it."""
    return _pick(d.bounds.get(f.fix_id) if f.fix_id else None, _claim(f))


def bound_for(d: Diagnosis, fix_id: str) -> Bound | None:
    """The upper bound on what ``fix_id`` can gain: :func:`bound_of` the finding that proposed it (a group's lead
    or one of its rules), else of the group whose fix has it as an alternative (another lever on the same time),
    else its own bound when it has one."""
    from advisors.fixes import ALTERNATIVES

    own = d.bounds.get(fix_id)
    for g in d.findings:
        for f in (g, *g.related):
            if f.fix_id == fix_id:
                return bound_of(d, f)
    for g in d.findings:
        if any(fix_id in ALTERNATIVES.get(f.fix_id or "", ()) for f in (g, *g.related)):
            return _pick(own, _claim(g, lever=fix_id))
    return own


def upper_bound_for(d: Diagnosis, fix_id: str) -> float | None:
    """The speed-up of :func:`bound_for` (``None``: no bound)."""
    b = bound_for(d, fix_id)
    return b.speedup if b is not None else None


def finding_json(f: Finding, d: Diagnosis | None = None) -> dict[str, Any]:
    """A finding as JSON: its severity (settled), ``upper_bound_speedup`` (1 / (1 - stake), ``null`` when
    the severity is not step time), the region it claims, the rule's own ``estimate`` when the region had less
    left, and under ``rules`` the other rules that saw the same time, each with its own evidence and fix (as
    written for the run of ``d``: :meth:`Diagnosis.fix_here`)."""
    fix = d.fix_here(f.fix_id, FIXES) if d is not None else FIXES.get(f.fix_id or "")
    out: dict[str, Any] = {
        "rule": f.rule,
        "name": f.name,
        "bottleneck": f.bottleneck.value,
        "severity": f.severity,
        "upper_bound_speedup": f.upper_bound_speedup,
        "claims": f.region,
        "estimate": f.estimate,
        "at_stake": f.at_stake,
        "confidence": f.confidence,
        "message": f.message,
        "evidence": dict(f.evidence),
        "fix": fix.to_json() if fix else None,
    }
    if f.related:
        out["rules"] = [finding_json(m, d) for m in f.related]
    return out


def _bounded(doc: dict[str, Any], d: Diagnosis, f: Finding) -> dict[str, Any]:
    """A finding's JSON with its fix's own bound (``fix_bound``: share, speed-up, assumption) beside it, and
    ``upper_bound_speedup`` the one bound of :func:`bound_of`."""
    own = d.bounds.get(f.fix_id) if f.fix_id else None
    if own is not None:
        doc["fix_bound"] = own.to_json()
        chosen = bound_of(d, f)
        doc["upper_bound_speedup"] = chosen.speedup if chosen is not None else None
    if "rules" in doc:
        doc["rules"] = [_bounded(m, d, r) for m, r in zip(doc["rules"], f.related)]
    return doc


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    """The advisor half of ``analyze --json``: bottleneck, confidence, findings (binding first; each one cause,
    with the rules that saw it), the step's regions they claimed from (``accounting``), notes."""
    return {
        "bottleneck": d.bottleneck.value,
        "confidence": d.confidence,
        "findings": [_bounded(finding_json(f, d), d, f) for f in d.findings],
        "evidence": dict(d.evidence),
        "ranking": ranking_json(rank(d)),
        "accounting": {k: round(v, 4) for k, v in d.regions.items()},
        "not_enough_data": [
            {"bottleneck": n.bottleneck.value, "reason": n.reason, "whole_class": n.whole_class}
            for n in d.notes
        ],
    }
