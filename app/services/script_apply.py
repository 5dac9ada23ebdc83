"""Glue of the Advisor's Apply for a launched script run (no Streamlit): the script as a
:class:`~profilers.run.script_spec.ScriptSpec` again, the fixes that can be injected into it, the ones that need the
user's own change, and the experiment or the ladder started in the background.

The spec comes from the run folder: ``script.json`` when the run was started from a spec (an A/B trial, an
``optimize`` run), else ``launch.json`` (command, folder, ranks). The strategy learns the script's context from
the run folder (device, loader settings, call sites in ``injected.json``, host cores busy), as
``python -m advisors optimize -- python train.py`` does after its first run. Every trial is a real run of the
unmodified script with the fix injected at boot (``advisors.experiments.trials.script_runner``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisors.verdict import Diagnosis, Fix
from advisors.fixes.context import ScriptContext
from advisors.experiments.script_strategy import ScriptStrategy, context_of
from app.services import stored_jobs
from app.services.jobs import BackgroundJob
from profilers.run.records import RunRecord
from advisors.analysis import Analysis
from profilers.errors import RunError
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore
from profilers.store.files import read_json


def script_spec(run_dir: Path) -> ScriptSpec:
    """The spec that re-runs the launched script of ``run_dir``. RunError/SpecError say why it cannot be (no
    ``launch.json``, the script is gone, a multi-node run whose rendezvous was not recorded)."""
    saved = read_json(run_dir / "script.json")
    launch = read_json(run_dir / "launch.json")
    ran_with = (
        launch.get("interpreter") if isinstance(launch, dict) else None
    )  # the same interpreter again
    if isinstance(saved, dict):
        spec = ScriptSpec.from_dict(saved)
    else:
        if not isinstance(launch, dict) or not launch.get("command"):
            raise RunError("this run has no launch.json with the command that started it")
        spec = ScriptSpec(
            command=tuple(str(c) for c in launch["command"]),
            cwd=str(launch.get("cwd") or "."),
            nproc_per_node=int(launch.get("nproc_per_node") or 1),
            nnodes=int(launch.get("nnodes") or 1),
        )
    if spec.python is None and isinstance(ran_with, str) and ran_with:
        spec = spec.patch(python=ran_with)
    spec.name  # the command is read again here: a script that is gone is refused before any run
    return spec


@dataclass(frozen=True)
class ScriptTarget:
    """A launched run that can be run again: its spec, folder, device and what its folder says of the script."""

    spec: ScriptSpec
    run_dir: Path
    device: str
    ctx: ScriptContext

    def strategy(self) -> ScriptStrategy:
        """A strategy that already knows this run's context (loader settings, call sites, cores busy)."""
        s = ScriptStrategy(self.spec, self.device)
        s.ctx = self.ctx
        return s

    def with_steps(self, measure_steps: int) -> ScriptTarget:
        """The same target timing ``measure_steps`` steps per run. A sample workload stops at its own ``--steps``,
        so that flag grows to outlast the warm-up, the timed steps and the profiler's window (else its trials
        time the steps it has and never profile: no trace for a ladder's next diagnosis)."""
        spec = self.spec.patch(measure_steps=measure_steps)
        return ScriptTarget(
            spec.patch(command=_outlasting(spec)), self.run_dir, self.device, self.ctx
        )


def _outlasting(spec: ScriptSpec) -> tuple[str, ...]:
    """A workload's command with ``--steps`` at least the spec's whole run; any other command as it is."""
    from advisors.fixes.conventions.editing import with_flag
    from profilers.run.command import workload_of_command

    command = tuple(spec.command)
    if workload_of_command(command) is None or "--epochs" in command or "--steps" not in command:
        return command
    given = (
        command[command.index("--steps") + 1] if command.index("--steps") + 1 < len(command) else ""
    )
    steps = int(given) if given.isdigit() else 0
    return (
        with_flag(command, ["--steps"], str(max(steps, spec.total_steps)))
        if spec.total_steps > steps
        else command
    )


def target_of(run_dir: Path | str, device: str) -> ScriptTarget:
    """The launched run in ``run_dir`` as something to apply fixes to; raises a StepwiseError saying why not."""
    run_dir = Path(run_dir)
    spec = script_spec(run_dir)
    ctx = context_of(run_dir, ScriptContext(device=device, world_size=spec.world_size))
    return ScriptTarget(spec, run_dir, ctx.device, ctx)


@dataclass(frozen=True)
class Offer:
    """What the Advisor offers for a script run: ``fixes`` to inject and measure; ``yours``: fixes the diagnosis
    proposes that need the loop rewritten (``(fix, why)``, why starting "not injectable: change it yourself");
    ``not_here``: injectable fixes that cannot act on this device or world size (``(fix, why)``)."""

    fixes: list[Fix] = field(default_factory=list)
    yours: list[tuple[Fix, str]] = field(default_factory=list)
    not_here: list[tuple[Fix, str]] = field(default_factory=list)


def offer(target: ScriptTarget, d: Diagnosis | None) -> Offer:
    """The fixes for diagnosis ``d`` of the target run, sorted into the three groups of :class:`Offer`."""
    from advisors.fixes import FIXES, applies
    from advisors.experiments.optimize import proposed
    from advisors.experiments.script_fixes import not_injectable

    if d is None:
        return Offer()
    s = target.strategy()
    not_here = []
    for fix_id in proposed(d):
        fix = FIXES[fix_id]
        why = applies(fix, target.ctx.device, target.spec.world_size)
        if why is not None and not_injectable(fix) is None:
            not_here.append((fix, why))
    return Offer(
        fixes=list(s.candidates(d, target.spec, set())), yours=s.advice(d), not_here=not_here
    )


def _policy(trials: int, max_trials: int | None) -> Any:
    """The A/B policy of an Apply or a ladder: ``trials`` pairs, up to ``max_trials`` (the default's
    extension when not given; never fewer than ``trials``)."""
    from advisors.experiments.experiment import Policy

    most = Policy.max_trials if max_trials is None else max_trials
    return Policy(trials=trials, max_trials=max(most, trials))


def start_experiment(
    store: RunStore,
    source: RunRecord,
    a: Analysis,
    target: ScriptTarget,
    fix: Fix,
    trials: int,
    max_trials: int | None = None,
) -> BackgroundJob[Any]:
    """The script without and with ``fix`` injected, interleaved, ``trials`` runs each, as a stored experiment of
    ``source``; the result is an ``Experiment`` (``not_applied`` says why when the fix did not act)."""
    from advisors.experiments import trials as trial_runs
    from advisors.experiments.experiment import run_experiment

    strategy = target.strategy()
    return stored_jobs.start(
        store,
        source,
        "apply",
        {"fix": fix.id, "fix_title": fix.title, "trials": trials},
        a,
        lambda exp_id, report: run_experiment(
            target.spec,
            fix,
            stored_jobs.stoppable(
                store, exp_id, trial_runs.script_runner(store, experiment=exp_id)
            ),
            _policy(trials, max_trials),
            on_progress=report,
            apply=strategy.apply,
            proof=strategy.proof(fix),
        ),
    )


def start_ladder(
    store: RunStore,
    source: RunRecord,
    a: Analysis,
    target: ScriptTarget,
    rounds: int,
    trials: int,
    max_trials: int | None = None,
    measured_before: dict[str, str] | None = None,
) -> BackgroundJob[Any]:
    """Diagnose a fresh run → inject → measure, ``rounds`` times, as a stored experiment of ``source``; the
    result is a ``Ladder`` (with ``advice``: the fixes left to the user). ``measured_before``: fixes an earlier
    Apply on ``source`` measured and rejected, not re-tried in round 1."""
    from advisors.experiments import trials as trial_runs
    from advisors.experiments.optimize import optimize

    spec, device = target.spec, target.device
    return stored_jobs.start(
        store,
        source,
        "ladder",
        {"rounds": rounds, "trials": trials},
        a,
        lambda exp_id, report: optimize(
            spec,
            stored_jobs.stoppable(
                store, exp_id, trial_runs.script_runner(store, experiment=exp_id)
            ),
            rounds=rounds,
            policy=_policy(trials, max_trials),
            device=device,
            on_progress=report,
            strategy=target.strategy(),
            measured_before=measured_before,
        ),
    )


def describe(spec: ScriptSpec) -> str:
    """One line: what each trial runs (plain text; the page escapes it)."""
    ranks = f" on {spec.world_size} ranks" if spec.world_size > 1 else ""
    return (
        f"{' '.join(spec.command)} in {spec.cwd}{ranks}: {spec.warmup_steps} warm-up steps, "
        f"{spec.measure_steps} timed steps, then {spec.profile_steps} profiled; seed {spec.seed} in every run"
    )


__all__ = [
    "Offer",
    "ScriptTarget",
    "describe",
    "offer",
    "script_spec",
    "start_experiment",
    "start_ladder",
    "target_of",
]


def injected_knobs(target: ScriptTarget, fix: Fix) -> tuple[dict[str, object], str | None]:
    """What Apply will inject for ``fix`` on this run, and where its worker count comes from: the run's one
    count (``advisors.fixes.plan_workers``), the number its advice quotes and its snippet writes."""
    from advisors.fixes import plan_workers, spec_of

    injection = spec_of(fix.id).injection
    knobs = (injection.knobs(target.ctx) or {}) if injection is not None else {}
    ctx = target.ctx
    why = None
    if isinstance(knobs.get("num_workers"), int):
        why = plan_workers(ctx.cores, ctx.workers, ctx.host_busy).why
    return dict(knobs), why
