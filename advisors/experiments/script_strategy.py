"""Optimising a user's script: the :class:`~advisors.experiments.optimize.Strategy` whose fixes are injected at boot.

After every diagnosed run it learns the script's context from the run folder (device, ranks, the training
DataLoader's settings and call sites from ``injected.json``, host cores busy from the telemetry), so the next
fix is chosen from the run's own numbers. Fixes that need the loop rewritten are returned as advice with the
reason, never skipped in silence — unless the script has its own flag for them (``--grad-accum-steps``: then they
are measured through it); fixes that cannot act on this device or world size are not tried.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from advisors.experiments.experiment import ProofFn
from advisors.fixes import FIXES, applies, spec_of
from advisors.fixes.context import ScriptContext
from advisors.fixes.data.workers import cores_of
from advisors.verdict import Diagnosis, Fix
from advisors.observation import run_facts, run_layers_record
from advisors.experiments.optimize import proposed
from advisors.experiments.script_fixes import (
    not_injectable,
    script_knob,
    script_patched,
    where_for,
    why_not_applied,
)
from advisors.fixes.conventions import KnobChange
from advisors.experiments.trials import RunOutcome
from profilers.errors import SpecError
from profilers.layers import LayerRow
from profilers.run.script_spec import ScriptSpec
from profilers.store.files import read_json


class ScriptStrategy:
    """``forced``: fix ids to try as asked (``optimize --fix``), even where the diagnosis did not propose them or
    they are not expected to act here — the experiment then shows whether they applied."""

    def __init__(
        self,
        spec: ScriptSpec,
        device: str = "cpu",
        forced: tuple[str, ...] = (),
        own_knobs: bool = True,
    ) -> None:
        """``own_knobs``: a fix the script has its own flag or config line for is measured through it (the
        default); ``False`` injects every fix (``optimize --inject``, to compare the two)."""
        self.own_knobs = own_knobs
        self.spec = spec
        self.ctx = ScriptContext(device=device, world_size=spec.world_size)
        unknown = [f for f in forced if f not in FIXES]
        if unknown:
            raise SpecError(f"unknown fix {unknown[0]!r}; known: {', '.join(FIXES)}")
        blocked = [f for f in forced if not_injectable(FIXES[f]) and spec_of(f).own_flag is None]
        if blocked:
            raise SpecError(f"{blocked[0]} is not injectable: {not_injectable(FIXES[blocked[0]])}")
        self.forced = tuple(forced)
        self.knob_changes: dict[
            str, KnobChange
        ] = {}  # fix id -> the script's own flag that did it (last apply)

    def learn(self, outcome: RunOutcome) -> None:
        if outcome.run_dir is None:
            return
        self.ctx = context_of(Path(outcome.run_dir), self.ctx)
        if not self.own_knobs:
            self.ctx = replace(self.ctx, config={})

    def candidates(self, d: Diagnosis, spec: ScriptSpec, rejected: set[str]) -> Iterator[Fix]:
        if self.forced:
            yield from (
                FIXES[f]
                for f in self.forced
                if f not in rejected and script_patched(spec, FIXES[f], self.ctx) is not None
            )
            return
        for fix_id in proposed(d):
            fix = FIXES[fix_id]
            if fix_id in rejected or applies(fix, self.ctx.device, spec.world_size):
                continue
            if (
                script_patched(spec, fix, self.ctx) is not None
            ):  # injected, or the script's own flag
                yield fix

    def apply(self, spec: ScriptSpec, fix: Fix) -> ScriptSpec:
        out = script_patched(spec, fix, self.ctx)
        if out is None:
            raise SpecError(f"{fix.title}: nothing new to inject into this script")
        change = script_knob(spec, fix, self.ctx)
        if change is not None:
            self.knob_changes[fix.id] = change
        else:
            self.knob_changes.pop(fix.id, None)
        return out

    def proof(self, fix: Fix) -> ProofFn:
        return lambda outcome: why_not_applied(fix, outcome.applied)

    def advice(self, d: Diagnosis) -> list[tuple[Fix, str]]:
        out = []
        for fix_id in proposed(d):
            fix = FIXES[fix_id]
            why = spec_of(fix_id).not_injectable_here(self.ctx)
            if (
                why is not None
                and applies(fix, self.ctx.device, self.ctx.world_size) is None
                and script_knob(self.spec, fix, self.ctx) is None
            ):  # no flag of the script's own makes it either
                out.append((fix, f"not injectable: change it yourself ({why})"))
        return out

    def where(self, fix: Fix) -> dict[str, Any] | None:
        change = self.knob_changes.get(fix.id)
        return change.where() if change is not None else where_for(fix, self.ctx)


def context_of(run_dir: Path, before: ScriptContext) -> ScriptContext:
    """What a script's run folder says about it: loader settings and call sites, device, host cores busy,
    the model's per-module rows."""
    injected = read_json(run_dir / "injected.json")
    injected = injected if isinstance(injected, dict) else {}
    facts = run_facts(run_dir)
    tel = facts.telemetry
    # the run's own demand on the cores it could use: a host busy with other programs is no reason for fewer workers
    busy = tel.run_cpu_busy if tel is not None and tel.run_cpu_busy is not None else None
    device = "cuda" if (facts.device or "").startswith("cuda") else before.device
    return ScriptContext(
        device=device,
        world_size=facts.world_size or before.world_size,
        cores=cores_of(tel, facts.threads) or before.cores,
        host_busy=busy,
        loader=injected.get("loader") or before.loader,
        sites=injected.get("sites") or before.sites,
        all_sites=injected.get("all_sites") or before.all_sites,
        config=injected.get("config") or before.config,
        threads=facts.threads or before.threads,
        other_cores=tel.other_cores if tel is not None else before.other_cores,
        layers=_layer_rows(run_dir) or before.layers,
    )


def _layer_rows(run_dir: Path) -> tuple[LayerRow, ...]:
    """The run's per-module rows (the agent's ``layers.json``; none: it wrote none)."""
    layers = run_layers_record(run_dir)
    return layers.rows if layers is not None else ()
