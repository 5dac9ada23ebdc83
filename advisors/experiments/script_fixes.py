"""How a registered fix reaches a user's unmodified script: the script's own flag or config line when it has one
(:mod:`advisors.fixes.conventions`), else the knobs the launcher injects at boot, and where in the user's
code the change belongs. What each fix asks for (its :class:`~advisors.fixes.base.Injection` and ``own_flag``) is
in its own module of :mod:`advisors.fixes`.
"""

from __future__ import annotations

from typing import Any, Mapping

from advisors.experiments.script_diff import switch_for
from advisors.experiments.script_terms import construction_site, ran_build
from advisors.fixes.conventions import KnobChange, knob_change
from advisors.fixes import spec_of
from advisors.fixes.context import ScriptContext
from advisors.verdict import Fix
from profilers.run.script_spec import ScriptSpec


def not_injectable(fix: Fix) -> str | None:
    """Why ``fix`` cannot be injected into a script, or ``None`` when it can."""
    return spec_of(fix.id).not_injectable()


def script_knob(spec: ScriptSpec, fix: Fix, ctx: ScriptContext) -> KnobChange | None:
    """``fix`` as the script's own flag or config line (:mod:`advisors.fixes.conventions`), if it has one
    (its own switch for the fix first, then the knobs its injection would set)."""
    reg = spec_of(fix.id)
    for inj in (reg.own_flag, reg.injection):
        knobs = inj.knobs(ctx) if inj is not None else None
        change = (
            knob_change(knobs, ctx.config, spec.command, spec.cwd, inj.proof)
            if inj and knobs
            else None
        )
        if change is not None:
            return change
    return None


def script_patched(spec: ScriptSpec, fix: Fix, ctx: ScriptContext) -> ScriptSpec | None:
    """``spec`` with ``fix`` applied, or ``None`` when the fix has nothing (new) to change here: the user's command
    with the script's own flag or config line changed when it has one for the fix (nothing injected, the effect
    checked), else the fix's knobs injected."""
    reg = spec_of(fix.id)
    if reg.conv_skip(ctx) is not None:
        return None
    if (
        reg.own_flag is not None and reg.injection is None
    ):  # no injection: the script's own flag, or nothing
        own = script_knob(spec, fix, ctx)
        out = spec.patch(command=own.command, observe=own.observe) if own is not None else spec
        return out if out != spec else None
    change = script_knob(spec, fix, ctx)  # the script's own switch, even where nothing is injected
    if change is not None:
        out = spec.patch(command=change.command, observe=change.observe)
        return out if out != spec else None
    inj = reg.injection
    knobs = inj.knobs(ctx) if inj is not None else None
    if not knobs:
        return None
    out = spec.patch(inject=knobs)
    return out if out != spec else None


def where_for(
    fix: Fix, ctx: ScriptContext, knobs: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """Where ``fix``'s change belongs in the user's code: the first site (``file``, ``line``, ``code``) plus
    ``target`` (the kind of call it changes) and ``all`` (every site the knobs act on, for one diff). A script
    driven by a framework whose switch takes every knob of the fix gets that switch
    (``TrainingArguments(...)``, ``L.Trainer(...)``, ``Accelerator(...)``); ``None``: no single place."""
    inj = spec_of(fix.id).injection
    if inj is None:
        return None
    knobs = knobs if knobs is not None else (inj.knobs(ctx) or {})
    switch = (
        switch_for(knobs, ctx.sites)
        if inj.target in (None, "dataloader", "model_call", "optimizer")
        else None
    )
    target = switch or inj.target
    if target is None or target not in ctx.sites:
        return None
    first = dict(ctx.sites[target])
    every = [dict(s) for s in (ctx.all_sites.get(target) or [first])]
    if target == "model_call":  # the training calls (grad enabled), not an evaluation under no_grad
        every = [s for s in every if s.get("grad") is not False] or every
        first = every[0]
    build = ctx.sites.get(
        "model_build"
    )  # the line that ran to move/build the model (absent in older runs)
    if target == "model_call" and inj.proof in (
        "compile",
        "compile_mode",
    ):  # compiled once, where it is built
        built = ran_build(build) or construction_site(first)
        if built is not None:
            return {**built, "target": "model_build", "all": [built]}
    return {**first, "target": target, "all": every, **({"build": build} if build else {})}


def why_not_applied(fix: Fix, applied: Mapping[str, Any] | None) -> str | None:
    """From a patched run's ``injected.json``: why the fix did not act (its proof knob's ``why``), else None."""
    reg = spec_of(fix.id)
    inj = reg.injection or reg.own_flag
    if inj is None or applied is None:
        return None
    knob = (applied.get("knobs") or {}).get(inj.proof)
    if knob is None:
        return f"the launcher has no record of {inj.proof}"
    return None if knob.get("acted") else str(knob.get("why") or "its effect was not seen")
