"""The advisor's values: the bottleneck classes, a rule's :class:`Finding`, a :class:`Fix` and a :class:`Diagnosis`.

All frozen. ``severity`` is always a share of step time (0..1) at stake — the time the matching fix can win
back at best — so findings of different classes compare on one scale, and the binding bottleneck is simply
the finding with the largest severity. In a diagnosis the severities are settled by
:mod:`advisors.accounting`: each microsecond of the step is claimed once, so they never double count.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Literal, Mapping

Device = Literal["any", "cuda", "cpu", "distributed"]
EvidenceValue = float | int | str | bool | None


class Bottleneck(str, Enum):
    """What limits the training step."""

    DATA = "data"
    MEMORY = "memory"
    COMPUTE = "compute"
    COMMUNICATION = "communication"
    HOST = "host"
    NONE = "none"


@dataclass(frozen=True)
class Fix:
    """A change that removes a bottleneck: the settings it changes plus the code a user writes in their own script.

    ``spec_patch`` maps spec fields to values; a :class:`Relative` value is resolved against the spec it is
    applied to (``grad_accum_steps: Relative(2)`` doubles it). ``snippet`` is the code change for uploaded
    traces, where there is no spec to patch. ``applies_to`` says where the fix can act.
    """

    id: str
    title: str
    bottleneck: Bottleneck
    spec_patch: Mapping[str, Any]
    snippet: str
    applies_to: Device
    explanation: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "bottleneck": self.bottleneck.value,
            "spec_patch": {k: _plain(v) for k, v in self.spec_patch.items()},
            "snippet": self.snippet,
            "applies_to": self.applies_to,
            "explanation": self.explanation,
        }


@dataclass(frozen=True)
class Relative:
    """A spec value relative to the current one: ``factor`` × the current value (integers stay integers)."""

    factor: float

    def __str__(self) -> str:
        return f"x{self.factor:g}"


#: ``Finding.region`` of findings whose severity is not step time (a risk, or run time saved).
OUTSIDE_STEP = "outside_step"


@dataclass(frozen=True)
class Finding:
    """What one rule concluded about one observation.

    In a :class:`Diagnosis` a finding leads its cause (:mod:`advisors.accounting`): ``related`` lists the other
    rules that saw the same time, ``region`` is the part of the step its severity was claimed from
    (:data:`OUTSIDE_STEP` for what is not step time — memory capacity, a loss plateau; ``None`` before the
    diagnosis settles it), and ``estimate`` the rule's own severity when the region had less left to claim
    (``None``: not capped). ``at_stake``: the share of the step the fix could remove at most, where the
    severity is the rule's expected part of it (that share × a saving the rule assumes); ``None``: the
    severity is the whole time at stake."""

    rule: str  # stable id, e.g. "DATA001"
    name: str  # readable name, e.g. "loader-starves-step"
    bottleneck: Bottleneck
    severity: float  # share of step time at stake, 0..1
    confidence: float  # 0..1
    message: str  # one sentence a person can act on
    evidence: Mapping[str, EvidenceValue]
    fix_id: str | None
    related: tuple[Finding, ...] = ()
    region: str | None = None
    estimate: float | None = None
    at_stake: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", _unit(self.severity))
        object.__setattr__(self, "confidence", _unit(self.confidence))

    @property
    def stake(self) -> float:
        """The share of the step whose vanishing bounds the fix: ``at_stake``, else the severity (also
        where the diagnosis capped the severity to what its region had left: no more is there)."""
        if self.at_stake is None or self.estimate is not None:
            return self.severity
        return max(self.severity, self.at_stake)

    @property
    def upper_bound_speedup(self) -> float | None:
        """The most the fix could gain if the time at stake vanished: ``1 / (1 - stake)`` (Amdahl). ``None``
        when the severity is not step time (:data:`OUTSIDE_STEP`) or when all of the step is at stake."""
        if self.region == OUTSIDE_STEP or self.stake >= 1.0:
            return None
        return round(1.0 / (1.0 - self.stake), 3)


@dataclass(frozen=True)
class Note:
    """An honest "not enough data": which class could not be (fully) judged, and why. ``whole_class`` is true
    when no rule of that class could judge the observation at all."""

    bottleneck: Bottleneck
    reason: str
    whole_class: bool = False


@dataclass(frozen=True)
class Diagnosis:
    """The binding bottleneck (``binding`` is ``None`` when nothing fired), the other findings ranked by
    severity, the headline evidence and what could not be judged. ``regions``: each region's share of step
    time, which the findings claimed from (:mod:`advisors.accounting`)."""

    bottleneck: Bottleneck
    confidence: float
    binding: Finding | None
    others: tuple[Finding, ...]
    evidence: Mapping[str, EvidenceValue]
    notes: tuple[Note, ...] = field(default=())
    regions: Mapping[str, float] = field(default_factory=dict)
    bounds: Mapping[str, Any] = field(
        default_factory=dict
    )  # fix id -> advisors.bounds.Bound (its narrower reach)
    # fix id -> its snippet as written for this run (the run's own worker count); the other fixes read
    # as the registry has them (fix_here)
    snippets: Mapping[str, str] = field(default_factory=dict)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every finding, binding first."""
        return ((self.binding,) if self.binding else ()) + self.others

    def fix_here(self, fix_id: str | None, registry: Mapping[str, Fix]) -> Fix | None:
        """The fix ``fix_id`` of ``registry`` as written for this run: with its snippet of :attr:`snippets`
        where there is one."""
        if fix_id is None or fix_id not in registry:
            return None
        fix = registry[fix_id]
        return replace(fix, snippet=self.snippets[fix_id]) if fix_id in self.snippets else fix


def _plain(v: Any) -> Any:
    """JSON-ready: relative values (``Relative``, ``WorkerCount``) as their short text."""
    return v if v is None or isinstance(v, (str, int, float, bool)) else str(v)


def _unit(x: float) -> float:
    return round(min(max(float(x), 0.0), 1.0), 6)
