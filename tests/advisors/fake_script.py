"""A script spec for the experiment machinery's tests: how a fix reaches it (injected knobs, or what its own flag
asks, as observed knobs) without a real script or a recorded config, and what the fakes read back from it."""

from __future__ import annotations

from typing import Any

from advisors.fixes import spec_of
from advisors.fixes.base import Times
from advisors.fixes.context import ScriptContext
from advisors.verdict import Fix
from profilers.run.script_spec import ScriptSpec

BASE = ScriptSpec(command=("python", "-m", "train"), cwd="/", measure_steps=20)
OWN = {
    "grad_accum_steps": 1,
    "batch_size": 32,
}  # what the fake script's own flags hold before any fix


def knob(spec: ScriptSpec, name: str, default: Any = None) -> Any:
    """A knob's value in ``spec``: injected or set by the script's own flag (observed), else ``default``."""
    return {**spec.inject, **spec.observe}.get(name, default)


def apply(spec: ScriptSpec, fix: Fix) -> ScriptSpec:
    """``fix`` applied as a :class:`ScriptStrategy` would: injected, or (a loop fix) the script's own flag set."""
    reg = spec_of(fix.id)
    if reg.injection is not None:
        knobs = reg.injection.knobs(
            ScriptContext(cores=4, loader={"num_workers": knob(spec, "num_workers", 0)})
        )
        return spec.patch(inject=knobs or {})
    assert reg.own_flag is not None, f"{fix.id} is neither injected nor a flag of the script's own"
    own = reg.own_flag.knobs(ScriptContext()) or {}
    return spec.patch(
        observe={
            k: v.factor * knob(spec, k, OWN.get(k, 1)) if isinstance(v, Times) else v
            for k, v in own.items()
        }
    )
