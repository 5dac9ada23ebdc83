"""``optimize(spec, run, rounds)``: diagnose, apply the matching fix, measure it, keep it or not, repeat.

Round 1 diagnoses one run of the starting spec; later rounds diagnose the last kept patched run (its trace
and result are in its run folder). Within a round the candidates are every finding's own fix in severity
order, then their :data:`~advisors.fixes.ALTERNATIVES` — skipping advice-only fixes, fixes that
cannot act here (CUDA-only on a CPU, DDP-only with one rank), no-op patches and fixes already rejected. A
round ends at the first kept fix or after ``max_attempts`` experiments; a round with nothing kept ends the
search. The result is a :class:`Ladder`: every attempt with its numbers, kept or rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from advisors.diagnosis import diagnose, upper_bound_for
from advisors.experiment import Experiment, Policy, run_experiment
from advisors.fixes import ALTERNATIVES, FIXES, applies, patched
from advisors.model import Diagnosis, Fix
from advisors.observation import observe
from advisors.trials import ProgressFn, RunFn, RunOutcome
from profilers.errors import SpecError
from profilers.spec import TrainingSpec

MAX_ATTEMPTS = 3
Observe = Callable[[RunOutcome], Diagnosis]


@dataclass(frozen=True)
class Rung:
    """One attempted fix. ``cumulative`` is the product of kept ratios up to and including this rung."""

    round: int
    bottleneck: str
    rule: str | None
    experiment: Experiment
    cumulative: float
    upper_bound: float | None = None  # the diagnosis' bound on what this fix could gain (Finding.upper_bound_speedup)


@dataclass(frozen=True)
class Ladder:
    """The whole search: start and final spec, every attempt, the last diagnosis."""

    start: TrainingSpec
    final: TrainingSpec
    rungs: tuple[Rung, ...]
    last_diagnosis: Diagnosis | None

    @property
    def kept(self) -> tuple[Rung, ...]:
        return tuple(r for r in self.rungs if r.experiment.kept)

    @property
    def total_speedup(self) -> float:
        """Product of the kept fixes' measured per-sample ratios (an out-of-memory fix counts its cost)."""
        out = 1.0
        for r in self.kept:
            out *= r.experiment.speedup or 1.0
        return out


def diagnose_outcome(outcome: RunOutcome) -> Diagnosis:
    """Diagnose a trial from its run folder (trace, result, steps)."""
    if outcome.run_dir is None:
        raise SpecError("this trial has no run folder to diagnose")
    return diagnose(observe(Path(outcome.run_dir)))


def optimize(spec: TrainingSpec, run: RunFn, rounds: int = 3, policy: Policy = Policy(),
             device: str = "cpu", on_progress: ProgressFn | None = None,
             diagnose_run: Observe = diagnose_outcome, max_attempts: int = MAX_ATTEMPTS) -> Ladder:
    """Search for kept fixes, ``rounds`` diagnoses at most. ``device`` is where runs execute (``cpu``/``cuda``)."""
    emit = on_progress or (lambda _: None)
    emit({"phase": "diagnose", "round": 1})
    diagnosis = diagnose_run(run(spec, lambda p: emit({"phase": "diagnosis_run", "round": 1, "run": p})))
    current, cumulative = spec, 1.0
    rungs: list[Rung] = []
    rejected: set[str] = set()
    for rnd in range(1, rounds + 1):
        kept_exp: Experiment | None = None
        for attempt, fix in enumerate(candidates(diagnosis, current, device, rejected)):
            if attempt >= max_attempts:
                break
            emit({"phase": "experiment", "round": rnd, "fix": fix.id})
            exp = run_experiment(current, fix, run, policy, _tagged(emit, rnd, fix.id))
            if exp.kept:
                cumulative *= exp.speedup or 1.0
            binding = diagnosis.binding
            rungs.append(Rung(rnd, diagnosis.bottleneck.value, binding.rule if binding else None, exp, cumulative,
                              upper_bound_for(diagnosis, fix.id)))
            if exp.kept:
                kept_exp = exp
                break
            rejected.add(fix.id)
        if kept_exp is None:
            break
        current, rejected = kept_exp.patched.spec, set()
        if rnd < rounds:
            emit({"phase": "diagnose", "round": rnd + 1})
            last_ok = [o for o in kept_exp.patched.outcomes if o.run_dir]
            diagnosis = diagnose_run(last_ok[-1])
    return Ladder(start=spec, final=current, rungs=tuple(rungs), last_diagnosis=diagnosis)


def _tagged(emit: ProgressFn, rnd: int, fix_id: str) -> ProgressFn:
    """Progress events of one experiment, tagged with its round and fix."""
    return lambda event: emit({**event, "round": rnd, "fix": fix_id})


def candidates(d: Diagnosis, spec: TrainingSpec, device: str, rejected: set[str]) -> Iterator[Fix]:
    """Fixes worth an experiment for diagnosis ``d`` on ``spec``: every finding's own fix in severity order (a
    finding's lead rule first, then the other rules that saw the same time), then their alternatives (the same
    bottleneck, another lever)."""
    proposed = [f.fix_id for g in d.findings if g.severity > 0 for f in (g, *g.related) if f.fix_id is not None]
    ordered = [*proposed, *(alt for fix_id in proposed for alt in ALTERNATIVES.get(fix_id, ()))]
    for fix_id in dict.fromkeys(ordered):
        fix = FIXES[fix_id]
        if fix_id not in rejected and fix.spec_patch and applies(fix, device, spec.world_size) is None \
                and _changes(spec, fix):
            yield fix


def _changes(spec: TrainingSpec, fix: Fix) -> bool:
    try:
        return patched(spec, fix) != spec
    except SpecError:
        return False
