"""The shape of a rule: a small class with a stable id, a readable name, a bottleneck class, a docstring that
is its documentation, named thresholds (overridable), the fix it proposes, and ``fires``/``passes`` examples
that are its tests.

A rule reads :class:`~advisors.facts.Facts` and returns a :class:`~advisors.verdict.Finding` or ``None``;
``missing(facts)`` says honestly when the observation holds too little to judge. Callers use
:meth:`Rule.evaluate`, which asks ``missing()`` first and calls ``check()`` only when the rule can judge: a
``check()`` never repeats that preamble, and never fires on what its ``missing()`` said it cannot see.

A ``fires`` example states the fix its finding proposes and its severity (``Example(..., fix=..., severity=...)``):
the examples are the rule's tests, so they pin what the rule advises, not only that it speaks.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

from advisors.facts import Facts, derive
from advisors.verdict import Bottleneck, EvidenceValue, Finding
from advisors.observation import Observation

#: Confidence at the firing threshold and at the "high" level; linear in between.
CONFIDENCE_AT_THRESHOLD = 0.55
CONFIDENCE_AT_HIGH = 0.95
#: Discounts when the trace itself is thin.
INFERRED_STEPS_FACTOR = 0.85  # no ProfilerStep markers: the whole window was taken as one step
SINGLE_STEP_FACTOR = 0.9  # one step only: nothing to say how typical it is
RULE_FIX: Any = (
    object()
)  # ``finding(fix_id=...)`` default: the rule's own ``fix_id`` (``None`` means no fix)
#: A finding holding less of the step than this is a minor one, not what binds, when a *fallback* rule (``fallback``)
#: names the time the step is made of instead (COMP007: the device's own work): see advisors.diagnosis.
MIN_BINDING_SHARE = 0.2


NOT_STATED = "(not stated)"  # an example that does not pin its fix (``passes`` examples never fire)


@dataclass(frozen=True)
class Example:
    """A named synthetic input (built lazily) for a rule's documentation and tests. A ``fires`` example also
    states the fix id its finding proposes (``None``: no fix) and its severity (share of step time)."""

    label: str
    build: Callable[[], Observation]
    fix: str | None = NOT_STATED
    severity: float | None = None

    def facts(self) -> Facts:
        return derive(self.build())


class Rule:
    """Base class. Subclasses set the class attributes and implement :meth:`check`."""

    id: ClassVar[str]
    name: ClassVar[str]
    bottleneck: ClassVar[Bottleneck]
    cause: ClassVar[str]  # the time it looks at: a key of advisors.accounting.CAUSES
    thresholds: ClassVar[Mapping[str, float]]
    fix_id: ClassVar[str | None] = None
    #: a fallback's finding is weighed only when no other finding holds MIN_BINDING_SHARE, and kept only if it binds
    fallback: ClassVar[bool] = False
    fires: ClassVar[tuple[Example, ...]] = ()
    passes: ClassVar[tuple[Example, ...]] = ()

    def __init__(self, overrides: Mapping[str, float] | None = None) -> None:
        unknown = sorted(set(overrides or {}) - set(self.thresholds))
        if unknown:
            raise ValueError(
                f"{self.id}: unknown threshold(s) {unknown}; known: {sorted(self.thresholds)}"
            )
        self.t: Mapping[str, float] = {**self.thresholds, **(overrides or {})}

    def evaluate(self, f: Facts) -> Finding | None:
        """The rule's finding on ``f``: ``None`` when :meth:`missing` says it cannot judge, else :meth:`check`."""
        if self.missing(f) is not None:
            return None
        return self.check(f)

    def check(self, f: Facts) -> Finding | None:  # pragma: no cover - abstract
        """The finding, assuming :meth:`missing` found nothing missing (call :meth:`evaluate`, not this)."""
        raise NotImplementedError

    def missing(self, f: Facts) -> str | None:
        """Why this rule cannot judge the observation, or ``None`` when it can."""
        return None if f.has_steps else "no profiled steps to measure"

    # -- helpers for subclasses ---------------------------------------------------------------------------
    def finding(
        self,
        f: Facts,
        severity: float,
        confidence: float,
        message: str,
        evidence: Mapping[str, EvidenceValue],
        fix_id: str | None = RULE_FIX,
        at_stake: float | None = None,
    ) -> Finding:
        """``at_stake``: the share the fix could remove at most, when ``severity`` is the part of it the
        rule expects (:attr:`Finding.at_stake`)."""
        return Finding(
            rule=self.id,
            name=self.name,
            bottleneck=self.bottleneck,
            severity=severity,
            confidence=confidence * data_quality(f),
            message=message,
            evidence={k: _round(v) for k, v in evidence.items()},
            fix_id=self.fix_id if fix_id is RULE_FIX else fix_id,
            at_stake=at_stake,
        )

    @classmethod
    def doc(cls) -> dict[str, Any]:
        """The rule as documentation (the dashboard's Rules page is built from this)."""
        return {
            "id": cls.id,
            "name": cls.name,
            "bottleneck": cls.bottleneck.value,
            "cause": cls.cause,
            "doc": inspect.cleandoc(cls.__doc__ or ""),
            "thresholds": dict(cls.thresholds),
            "fix": cls.fix_id,
            "fires": [e.label for e in cls.fires],
            "passes": [e.label for e in cls.passes],
        }


def ramp(value: float, threshold: float, high: float) -> float:
    """Confidence growing linearly from :data:`CONFIDENCE_AT_THRESHOLD` at ``threshold`` to
    :data:`CONFIDENCE_AT_HIGH` at ``high`` (clamped)."""
    if high <= threshold:
        return CONFIDENCE_AT_HIGH
    x = min(max((value - threshold) / (high - threshold), 0.0), 1.0)
    return CONFIDENCE_AT_THRESHOLD + x * (CONFIDENCE_AT_HIGH - CONFIDENCE_AT_THRESHOLD)


def data_quality(f: Facts) -> float:
    factor = 1.0
    if f.steps_inferred:
        factor *= INFERRED_STEPS_FACTOR
    if f.has_steps and f.n_steps == 1:
        factor *= SINGLE_STEP_FACTOR
    return factor


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _round(v: EvidenceValue) -> EvidenceValue:
    return round(v, 4) if isinstance(v, float) else v
