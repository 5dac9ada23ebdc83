"""``optimize(spec, run, rounds, strategy=…)``: diagnose, apply the matching fix, measure it, keep it or not, repeat.

Round 1 diagnoses one run of the starting spec; later rounds diagnose the last kept patched run (its trace
and result are in its run folder). Within a round the candidates are every finding's own fix in severity
order, then their :data:`~advisors.fixes.ALTERNATIVES`, as the :class:`Strategy` offers them — for a script, a
sample workload's included, :class:`~advisors.experiments.script_strategy.ScriptStrategy`: the script's own flag
where it has one, else injection; advice-only fixes, fixes that cannot act here (CUDA-only on a CPU, DDP-only
with one rank), no-op changes and fixes already rejected are skipped. A round ends at the first kept fix or after
``max_attempts`` experiments; a round with nothing kept ends the search. The result is a :class:`Ladder`: every
attempt with its numbers, kept or rejected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, Mapping, Protocol, TypeVar

from advisors.bounds import Bound
from advisors.diagnosis import bound_for
from advisors.experiments.experiment import (
    ApplyFn,
    Arm,
    Experiment,
    Policy,
    ProofFn,
    SpecT_co,
    run_experiment,
)
from advisors.fixes import ALTERNATIVES
from advisors.verdict import Diagnosis, Fix
from advisors.experiments.progress import Progress, ProgressFn
from advisors.experiments.trials import RunFn, RunOutcome, Spec, SpecT
from profilers.errors import SpecError, StepwiseError
from profilers.run.script_output import PRINTED

MAX_ATTEMPTS = 3
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b.*")


class BaselineFailed(StepwiseError):
    """The starting run did not run: there is nothing to optimise. ``str()`` is the one ``error:`` line, with
    the script's own last error line; ``outcome`` has the status, the whole error and the stderr tail."""

    def __init__(self, outcome: RunOutcome, stderr_tail: str = "") -> None:
        self.outcome, self.stderr_tail = outcome, stderr_tail
        where = f" (run folder {outcome.run_dir})" if outcome.run_dir else ""
        how = {"out_of_memory": "ran out of memory", "killed": "was killed"}.get(
            outcome.status, outcome.status
        )
        # the error's own lines, not the script's output quoted below them (another rank's
        # error there is not the one that failed the run)
        own = (outcome.error or "").split(f"\n{PRINTED}")[0]
        line = last_error_line(own or stderr_tail) or "no error text"
        if outcome.status == "out_of_memory" and line.lower().startswith("out of memory: "):
            line = line[len("out of memory: ") :]  # "ran out of memory" says it once
        super().__init__(f"the baseline run {how}: {line}{where}")

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.outcome.status if self.outcome.status != "ok" else "failed",
            "error": str(self),
            "run_error": self.outcome.error,
            "stderr_tail": self.stderr_tail,
            "run_dir": self.outcome.run_dir,
            "rungs": [],
            "total_speedup": None,
        }


def last_error_line(text: str) -> str:
    """The script's own last error line: the last ``SomeError: …`` line of a traceback, else the first line."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.match(line):
            return line
    return lines[0] if lines else ""


Observe = Callable[[RunOutcome], Diagnosis]


@dataclass(frozen=True)
class Rung(Generic[SpecT_co]):
    """One attempted fix. ``cumulative`` is the product of kept ratios up to and including this rung;
    ``where`` the call site in the user's code the change belongs at (scripts; ``None``: no single place)."""

    round: int
    bottleneck: str
    rule: str | None
    experiment: Experiment[SpecT_co]
    cumulative: float
    where: dict[str, Any] | None = None
    bound: Bound | None = (
        None  # the round's diagnosis' bound on what this fix could gain (diagnosis.bound_for)
    )
    diagnosed_run: str | None = (
        None  # the run that diagnosis read (the round's baseline): the bound's baseline
    )

    @property
    def upper_bound(self) -> float | None:
        return self.bound.speedup if self.bound is not None else None


@dataclass(frozen=True)
class Advice:
    """A fix the diagnosis proposed that cannot be applied for you: ``why`` it needs your own change."""

    round: int
    bottleneck: str
    rule: str | None
    fix: Fix
    why: str


@dataclass(frozen=True)
class Ladder(Generic[SpecT_co]):
    """The whole search: start and final spec, every attempt, the last diagnosis, and the advice left to you."""

    start: SpecT_co
    final: SpecT_co
    rungs: tuple[Rung[SpecT_co], ...]
    last_diagnosis: Diagnosis | None
    advice: tuple[Advice, ...] = field(default=())
    # fixes round 1 did not try again: an earlier experiment on the same baseline measured them ("why" says which)
    not_retried: tuple[Advice, ...] = field(default=())
    diagnosis_run: RunOutcome | None = (
        None  # the run round 1 diagnosed (later rounds diagnose a kept patched trial)
    )

    @property
    def kept(self) -> tuple[Rung[SpecT_co], ...]:
        return tuple(r for r in self.rungs if r.experiment.kept)

    @property
    def total_speedup(self) -> float:
        """Product of the kept fixes' measured per-sample ratios (an out-of-memory fix counts its cost)."""
        out = 1.0
        for r in self.kept:
            out *= r.experiment.speedup or 1.0
        return out


_S = TypeVar("_S", bound=Spec)


class Strategy(Protocol[_S]):
    """How fixes reach one kind of spec: which to try, how to apply them, how to tell that one acted."""

    def proof(self, fix: Fix) -> ProofFn | None: ...

    def candidates(self, d: Diagnosis, spec: _S, rejected: set[str]) -> Iterator[Fix]: ...

    def apply(self, spec: _S, fix: Fix) -> _S: ...

    def learn(self, outcome: RunOutcome) -> None: ...

    def advice(self, d: Diagnosis) -> list[tuple[Fix, str]]: ...

    def where(self, fix: Fix) -> dict[str, Any] | None: ...


def diagnose_outcome(outcome: RunOutcome) -> Diagnosis:
    """A trial's diagnosis: its run folder's one analysis (:func:`advisors.analysis.analyse`, stored there), so
    the round's bound is the one that trial shows when it is opened in Analysis."""
    from advisors.analysis import analyse

    if outcome.run_dir is None:
        raise SpecError("this trial has no run folder to diagnose")
    d = analyse(Path(outcome.run_dir), charts=False).diagnosis
    if d is None:
        raise SpecError(f"the advisor could not judge the trial in {outcome.run_dir}")
    return d


def optimize(
    spec: SpecT,
    run: RunFn[SpecT],
    rounds: int = 3,
    policy: Policy = Policy(),
    device: str = "cpu",
    on_progress: ProgressFn | None = None,
    diagnose_run: Observe = diagnose_outcome,
    max_attempts: int = MAX_ATTEMPTS,
    strategy: Strategy[SpecT] | None = None,
    measured_before: Mapping[str, str] | None = None,
) -> Ladder[SpecT]:
    """Search for kept fixes, ``rounds`` diagnoses at most. ``device`` is where runs execute (``cpu``/``cuda``);
    ``strategy`` says how fixes reach the spec (a script's:
    :class:`~advisors.experiments.script_strategy.ScriptStrategy`). ``measured_before``: fix id → what an
    earlier experiment on this same baseline measured ("the Apply at 10:42 measured 0.97× …, no gain"); round 1
    does not re-try those (its baseline is that one) and the ladder lists them in ``not_retried``."""
    if strategy is None:
        raise SpecError(
            "optimize needs a strategy: how fixes reach the spec (a script's ScriptStrategy)"
        )
    how: Strategy[SpecT] = strategy
    emit = on_progress or (lambda _: None)
    emit(Progress("diagnose", round=1))
    first = run(spec, lambda p: emit(Progress("diagnosis_run", round=1).with_run(p)))
    budgeted_oom = (
        first.status == "out_of_memory" and spec.memory_budget_mb is not None
    )  # a fix can cure it
    if first.status != "ok" and not budgeted_oom:
        raise BaselineFailed(first, _stderr_tail(first.run_dir))
    how.learn(first)
    diagnosis, diagnosed = diagnose_run(first), _run_id(first)
    current, cumulative = spec, 1.0
    rungs: list[Rung[SpecT]] = []
    advice: dict[str, Advice] = {}
    earlier = dict(measured_before or {})
    rejected: set[str] = set(earlier)
    skipped: dict[str, Advice] = {}
    not_applied: set[str] = (
        set()
    )  # a fix that could not act (e.g. a cache refused for random augmentation) stays so
    for rnd in range(1, rounds + 1):
        kept_exp: Experiment[SpecT] | None = None
        binding = diagnosis.binding
        for fix, why in how.advice(diagnosis):
            advice.setdefault(
                fix.id,
                Advice(
                    rnd, diagnosis.bottleneck.value, binding.rule if binding else None, fix, why
                ),
            )
        if (
            rnd == 1
        ):  # what round 1 would have tried, had an earlier experiment not measured it already
            for fix in how.candidates(diagnosis, current, not_applied):
                if fix.id in earlier:
                    skipped.setdefault(
                        fix.id,
                        Advice(
                            1,
                            diagnosis.bottleneck.value,
                            binding.rule if binding else None,
                            fix,
                            earlier[fix.id],
                        ),
                    )
        for attempt, fix in enumerate(how.candidates(diagnosis, current, rejected | not_applied)):
            if attempt >= max_attempts:
                break
            emit(
                Progress("experiment", round=rnd, fix=fix.title)
            )  # what the user reads: the title, not the id
            exp = run_experiment(
                current,
                fix,
                run,
                policy,
                _tagged(emit, rnd, fix.title),
                apply=how.apply,
                proof=how.proof(fix),
            )
            if policy.check:  # no trials of its own: its baseline is the run this round diagnosed
                exp = replace(exp, baseline=Arm("baseline", current, (first,)))
            if exp.kept:
                cumulative *= exp.speedup or 1.0
            rungs.append(
                Rung(
                    rnd,
                    diagnosis.bottleneck.value,
                    binding.rule if binding else None,
                    exp,
                    cumulative,
                    how.where(fix),
                    bound_for(diagnosis, fix.id),
                    diagnosed,
                )
            )
            if exp.kept:
                kept_exp = exp
                break
            rejected.add(fix.id)
            if exp.not_applied:
                not_applied.add(fix.id)
        if kept_exp is None:
            break
        current, rejected = kept_exp.patched.spec, set()
        if rnd < rounds:
            emit(Progress("diagnose", round=rnd + 1))
            last_ok = [o for o in kept_exp.patched.outcomes if o.run_dir]
            how.learn(last_ok[-1])
            diagnosis, diagnosed = diagnose_run(last_ok[-1]), _run_id(last_ok[-1])
    return Ladder(
        start=spec,
        final=current,
        rungs=tuple(rungs),
        last_diagnosis=diagnosis,
        advice=tuple(advice.values()),
        not_retried=tuple(skipped.values()),
        diagnosis_run=first,
    )


def _run_id(outcome: RunOutcome) -> str | None:
    return Path(outcome.run_dir).name if outcome.run_dir else None


def _stderr_tail(run_dir: str | None) -> str:
    """The script's own last output: under torchrun the failed ranks' (the folder's stderr is
    torchrun's)."""
    if not run_dir:
        return ""
    from profilers.run.handle import stderr_tail
    from profilers.run.script_output import printed_tail

    tails = {r: lines for r, lines in printed_tail(Path(run_dir)).items() if r is not None}
    if tails:
        return "\n".join(f"rank {r}: {line}" for r, lines in tails.items() for line in lines)
    return stderr_tail(Path(run_dir))


def _tagged(emit: ProgressFn, rnd: int, fix_title: str) -> ProgressFn:
    """Progress events of one experiment, tagged with its round and fix (its title)."""
    return lambda event: emit(event.tagged(rnd, fix_title))


def proposed(d: Diagnosis) -> list[str]:
    """Fix ids worth trying for ``d``: every finding's own fix in severity order (a finding's lead rule first,
    then the other rules that saw the same time), then their alternatives (the same bottleneck, another lever)."""
    own = [
        f.fix_id
        for g in d.findings
        if g.severity > 0
        for f in (g, *g.related)
        if f.fix_id is not None
    ]
    ids = list(
        dict.fromkeys([*own, *(alt for fix_id in own for alt in ALTERNATIVES.get(fix_id, ()))])
    )
    no_tf32 = (
        d.evidence.get("tf32_available") is False
    )  # a GPU older than Ampere (advisors.fit.tf32_fits)
    slow_bf16 = (
        d.evidence.get("cpu_bf16_fast") is False
    )  # a CPU whose bf16 matmuls are slower than fp32
    return [
        x
        for x in ids
        if not (no_tf32 and x == "tf32")
        and not (slow_bf16 and x in ("bf16_autocast", "fp16_autocast"))
    ]


__all__ = [
    "Advice",
    "ApplyFn",
    "Ladder",
    "Rung",
    "Strategy",
    "diagnose_outcome",
    "optimize",
    "proposed",
]
