"""One fix, defined in one place: the :class:`FixSpec` each module of :mod:`advisors.fixes` holds.

Modelled on torch's ``_pattern_matcher`` patterns: a name, a description, a documentation link, a ``skip`` that
says why the fix cannot act here, and examples the test suite runs (``tests/advisors/fixes/test_registry.py``).
A fix also says what it costs its user (:data:`EFFORT_LEVELS`), what to try when it is rejected, whether the run
already does it, and how it reaches an unmodified script: the knobs injected at boot (:class:`Injection`), the
script's own switch for it (``own_flag``, mapped onto each convention by knob name in
:mod:`advisors.fixes.conventions`), or why neither exists ("change it yourself").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping

from advisors.bounds import Reach
from advisors.facts import Facts
from advisors.fixes.context import ScriptContext
from advisors.verdict import Bottleneck, Device, Fix

#: What a fix costs its user, cheapest first: one keyword argument, a flag or config line, a code change, or a
#: rewrite of the training loop. Fixes are offered by expected gain for this effort (advisors.ranking).
EFFORT_LEVELS = ("keyword", "config", "code change", "loop rewrite")


@dataclass(frozen=True)
class Times:
    """A knob's value relative to the script's own: ``factor`` × the value its flag holds in this run."""

    factor: int


@dataclass(frozen=True)
class Injection:
    """``knobs(ctx)``: what to set (``None``: nothing left to try here); ``proof``: the knob that must act for
    the fix to count as applied; ``target``: the call site the change belongs at (``None``: no single place)."""

    knobs: Callable[[ScriptContext], dict[str, Any] | None]
    proof: str
    target: str | None = None


def const(**knobs: Any) -> Callable[[ScriptContext], dict[str, Any]]:
    """Knobs that do not depend on the run."""
    return lambda ctx: dict(knobs)


@dataclass(frozen=True)
class FixExample:
    """A case the test suite runs for its fix. On a run like ``ctx`` the fix is skipped with a reason that holds
    ``skipped`` (``None``: it applies there) and asks for ``knobs`` (its injection's, else its own flag's; ``None``:
    not checked, ``{}``: nothing to try). With ``script``: that small training script, run as
    ``python train.py ARGV…`` under the agent's config recorder, gets the fix as its own command ``changed``."""

    ctx: ScriptContext = field(default_factory=lambda: ScriptContext(cores=4))
    skipped: str | None = None
    knobs: Mapping[str, Any] | None = None
    script: str | None = None
    argv: tuple[str, ...] = ()
    changed: tuple[str, ...] | None = None


@dataclass(frozen=True)
class FixSpec:
    """Everything about one fix. ``settings``: what it changes, in run settings (``Relative(2)`` doubles the
    current value); ``effort``: one of :data:`EFFORT_LEVELS`; ``alternatives``: what to try next, in order, when it
    is rejected (the same bottleneck, another lever); ``injection``: its knobs set at boot in an unmodified script;
    ``own_flag``: the knobs of the script's own switch for it, tried before the injection (the loop's own knobs,
    which no injection can turn); ``manual``: why it can be neither (the user changes the code); ``empty_why``:
    beside an injection that may have nothing to set on a run, why the user changes the code there; ``conv_only``:
    it acts on convolutions only; ``done``: the run already does it (its spec, else its trace); ``bound``: the
    part of the step it can touch when that is narrower than its finding's time (:mod:`advisors.bounds`);
    ``exceeded_why``: why a measured gain beat that bound, from the baseline's step without that part and the
    patched step (ms)."""

    id: str
    title: str
    bottleneck: Bottleneck
    applies_to: Device
    explanation: str
    snippet: str
    docs: str
    effort: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    alternatives: tuple[str, ...] = ()
    # the fixes after which this one is tried, as one of their alternatives (declared here, so a new
    # fix joins the ladder from its own module)
    follows: tuple[str, ...] = ()
    injection: Injection | None = None
    own_flag: Injection | None = None
    manual: str | None = None
    empty_why: str | None = None
    conv_only: bool = False
    done: Callable[[Facts], bool] | None = None
    bound: Callable[[Facts], Reach | None] | None = None
    exceeded_why: Callable[[float | None, float | None], str | None] | None = None
    examples: tuple[FixExample, ...] = ()

    def __post_init__(self) -> None:
        if self.effort not in EFFORT_LEVELS:
            raise ValueError(f"{self.id}: effort {self.effort!r} is not one of {EFFORT_LEVELS}")

    @cached_property
    def fix(self) -> Fix:
        """The fix as the advisor's value (what a finding proposes, what ``--json`` holds)."""
        return Fix(
            id=self.id,
            title=self.title,
            bottleneck=self.bottleneck,
            spec_patch=self.settings,
            snippet=self.snippet.strip("\n"),
            applies_to=self.applies_to,
            explanation=self.explanation,
        )

    @property
    def level(self) -> int:
        """:attr:`effort` as an index into :data:`EFFORT_LEVELS` (cheapest 0)."""
        return EFFORT_LEVELS.index(self.effort)

    def device_skip(self, device: str, world_size: int) -> str | None:
        """Why the fix cannot act on this device/world size, or ``None`` when it can."""
        return device_skip(self.fix, device, world_size)

    def conv_skip(self, ctx: ScriptContext) -> str | None:
        """Why a convolution-only fix is not worth a trial: the launcher saw the model run no convolution."""
        if self.conv_only and ctx.convolutions == 0:
            return f"{self.title} acts on convolutions only; the model ran none"
        return None

    def skip(self, ctx: ScriptContext) -> str | None:
        """Why the fix cannot act on a run like ``ctx``, or ``None`` when it can."""
        return self.device_skip(ctx.device, ctx.world_size) or self.conv_skip(ctx)

    def not_injectable(self) -> str | None:
        """Why the fix cannot be injected into a script, or ``None`` when it can."""
        if self.injection is not None:
            return None
        return self.manual or f"{self.title} has no injection: it needs a change in your code"

    def not_injectable_here(self, ctx: ScriptContext) -> str | None:
        """Why the fix cannot be injected into a run like ``ctx``: :meth:`not_injectable`, or
        ``empty_why`` where its injection has nothing to set there."""
        if self.injection is not None and self.empty_why and not self.injection.knobs(ctx):
            return self.empty_why
        return self.not_injectable()


def device_skip(fix: Fix, device: str, world_size: int) -> str | None:
    """Why ``fix`` cannot act on this device/world size, or ``None`` when it can."""
    if fix.applies_to == "cuda" and device != "cuda":
        return f"{fix.title} acts on CUDA only; this run is on {device}"
    if fix.applies_to == "distributed" and world_size < 2:
        return f"{fix.title} needs more than one rank"
    return None


#: Runs the examples are written for: a 4-core CPU, a GPU, two GPU ranks.
ON_CPU = ScriptContext(device="cpu", cores=4)
ON_CUDA = ScriptContext(device="cuda", cores=4)
ON_TWO_RANKS = ScriptContext(device="cuda", world_size=2, cores=4)
