"""Apply a fix and prove it: baseline (A) and patched (B) runs, interleaved A B, B A, A B…, then a verdict.

Both arms use the same seed and data (the spec carries them). Each trial's measured steps exclude warm-up
and profiled steps (:mod:`advisors.experiments.trials`). The comparison is per-sample throughput, so a fix that changes
the micro-batch or the samples per step (accumulation, ``no_sync``) is judged on what counts.

A fix is **kept** when (1) both arms ran ``ok``, the lower bound of the 95% interval on the throughput ratio
exceeds ``1 + Policy.min_gain``, every pair saw the patched run faster, no trial that other programs competed
with can explain the gain (:mod:`advisors.experiments.pair_verdict`) and the loss holds; or (1b) for a memory fix on a running baseline, the peak
drops by ``min_peak_drop`` at no more than ``max_memory_cost`` per sample (headroom is its purpose); or (2) the baseline failed or ran out of memory and the
patched run is ``ok`` within the memory budget with the loss holding. In case (2) the baseline cannot be
timed, so a *reference* arm — the baseline with its memory budget lifted — is run instead, and the ratio
says what the fix costs per sample. Loss parity: at the last step both arms reached, the patched loss may
exceed the baseline's by at most ``loss_tolerance`` (relative); each run's loss there is its mean over the
last ``LOSS_WINDOW`` steps.

A fix whose pairs disagree, or whose trials other programs competed with so that too few clean pairs remain,
first gets more pairs (up to ``Policy.max_trials``); what still cannot be told apart is **inconclusive**, with
why ("other programs took 1.02 of 2 cores in the baseline's trial 3"; "pairs disagree: 2 of 3 saw it faster"):
neither kept nor rejected, the exit code of ``compare``'s inconclusive (3).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generic, Sequence, TypeVar

import numpy as np

from advisors.verdict import Bottleneck, Fix
from advisors.stats import LEVEL, N_BOOT, SEED, RatioEstimate, Trial, beside, throughput_ratio
from advisors.experiments.pair_verdict import PairJudgement, judge_pairs, leans, needs_more_pairs
from advisors.experiments.progress import Progress, ProgressFn
from advisors.experiments.results.outcome import Outcome, Why, Word, judged, slower
from advisors.experiments.trials import RunFn, RunOutcome, Spec, SpecT, spec_changes
from profilers.errors import SpecError

#: How a fix reaches a spec: ``ApplyFn[ScriptSpec]`` (the script's own flag, or injection).
ApplyFn = Callable[[SpecT, Fix], SpecT]
#: The kind of spec an arm, an experiment or a ladder holds; ``Experiment[Spec]`` is either kind.
SpecT_co = TypeVar("SpecT_co", bound=Spec, covariant=True)
ProofFn = Callable[
    [RunOutcome], "str | None"
]  # why the fix did not act in this patched run, or None

LOSS_WINDOW = (
    5  # final loss = mean over this many steps: one mini-batch's loss is too noisy to compare
)


@dataclass(frozen=True)
class Policy:
    """How much evidence a fix needs. All defaults are stated in the verdict text."""

    trials: int = 3
    max_trials: int = 5  # pairs that disagree, or were competed for, get more pairs up to this many
    min_gain: float = 0.03  # the interval's lower bound must exceed 1 + min_gain
    loss_tolerance: float = 0.05  # relative excess of the patched loss at the last common step
    min_peak_drop: float = (
        0.05  # a memory fix on a running baseline must cut the peak by this much …
    )
    max_memory_cost: float = 0.15  # … at no more than this per-sample cost (interval's lower bound)
    n_boot: int = N_BOOT
    level: float = LEVEL
    seed: int = SEED
    check: bool = (
        False  # run each patched spec once to show the change acts: no A/B trials, no verdict
    )


@dataclass(frozen=True)
class Arm(Generic[SpecT_co]):
    """The runs of one spec. ``status`` is ``ok`` only when every run was."""

    label: str
    spec: SpecT_co
    outcomes: tuple[RunOutcome, ...]

    @property
    def status(self) -> str:
        return (
            next((o.status for o in self.outcomes if not o.ok), "ok")
            if self.outcomes
            else "not run"
        )

    @property
    def trials(self) -> tuple[Trial, ...]:
        return tuple(o.trial for o in self.outcomes if o.ok and o.trial is not None)

    @property
    def step_time_ms(self) -> float | None:
        """The arm's time per step: one step's samples over the arm's samples/s, so the two multiply
        to the batch and read the same speed (each trial's elapsed ÷ steps; the median over trials,
        as the samples/s)."""
        rate = self.samples_per_s
        return self.trials[0].samples_per_step / rate * 1e3 if rate else None

    @property
    def median_step_ms(self) -> float | None:
        """The typical step: the median of every timed step of every run (warm-up excluded), the
        line the before/after box plot draws. Shown beside :attr:`step_time_ms`, never as the arm's
        speed."""
        walls = [w for t in self.trials for w in t.walls_ms]
        return float(np.median(walls)) if walls else None

    @property
    def rest_ms(self) -> float | None:
        """The arm's time per step without its batch drawing (elapsed − drawing, over steps), when
        recorded."""
        rests = [r for t in self.trials if (r := t.rest_ms) is not None]
        return float(np.median(rests)) if rests else None

    @property
    def samples_per_s(self) -> float | None:
        return float(np.median([t.throughput for t in self.trials])) if self.trials else None

    @property
    def peak_memory_mb(self) -> float | None:
        peaks = [o.peak_memory_mb for o in self.outcomes if o.peak_memory_mb is not None]
        return max(peaks) if peaks else None

    @property
    def host_load(self) -> float | None:
        """Median machine load average over the arm's runs: how much else was running meanwhile."""
        loads = [o.host_load for o in self.outcomes if o.host_load is not None]
        return float(np.median(loads)) if loads else None

    @property
    def error(self) -> str | None:
        return next((o.error for o in self.outcomes if not o.ok and o.error), None)


@dataclass(frozen=True)
class Experiment(Generic[SpecT_co]):
    """The verdict on one fix, with every run it rests on."""

    fix: Fix
    baseline: Arm[SpecT_co]
    patched: Arm[SpecT_co]
    reference: Arm[SpecT_co] | None
    ratio: RatioEstimate | None  # patched / (baseline or reference) per-sample throughput
    loss_delta: float | None
    loss_step: int | None
    kept: bool
    reason: str  # the verdict's whole sentence: ``outcome.reason``
    outcome: Outcome  # the verdict as data: its word, reason code and texts
    policy: Policy = field(default_factory=Policy)
    not_applied: str | None = None  # why an injected fix did not act (then ``kept`` is False)
    inconclusive: str | None = (
        None  # why the trials could not tell (contention, pairs that disagree)
    )
    left_out: tuple[
        int, ...
    ] = ()  # pairs (from 0) other programs competed for, left out of the verdict's medians

    @property
    def speedup(self) -> float | None:
        return self.ratio.point if self.ratio else None

    @property
    def before(self) -> Arm[SpecT_co]:
        """The arm the patched one is timed against: the reference when the baseline could not be timed."""
        return self.reference if self.reference is not None else self.baseline

    def spec_changes(self) -> dict[str, tuple[Any, Any]]:
        """``{field or knob: (baseline's, patched's)}``: what the fix changed in the spec."""
        return spec_changes(self.baseline.spec, self.patched.spec)


def run_experiment(
    base: SpecT,
    fix: Fix,
    run: RunFn[SpecT],
    policy: Policy = Policy(),
    on_progress: ProgressFn | None = None,
    apply: ApplyFn[SpecT] | None = None,
    proof: ProofFn | None = None,
) -> Experiment[SpecT]:
    """Run ``base`` and ``apply(base, fix)`` interleaved, ``policy.trials`` times each, and judge the fix.
    ``apply`` is how the fix reaches the script (``advisors.experiments.script_strategy``: its own flag, or
    injection). ``proof`` (scripts) says why a
    patched run shows no effect of the fix; the experiment then stops.

    Raises SpecError when the fix cannot be applied to ``base`` (advice-only fix, invalid combination).
    """
    if apply is None:
        raise SpecError(
            f"fix {fix.id!r}: pass apply= (a ScriptStrategy's), how the fix reaches the script"
        )
    spec_b = apply(base, fix)
    if policy.check:
        return _checked(
            fix, base, spec_b, _trial(run, spec_b, "patched", 0, policy, on_progress), policy, proof
        )
    base_runs: list[RunOutcome] = []
    ref_runs: list[RunOutcome] = []
    b_runs: list[RunOutcome] = []
    reference = base.patch(memory_budget_mb=None)
    i = 0
    while i < policy.trials or (
        i < policy.max_trials
        and base_runs
        and base_runs[0].ok
        and not ref_runs
        and needs_more_pairs(base_runs, b_runs, policy.trials, 1 + policy.min_gain)
    ):
        # A B, B A, A B …: neither arm always runs first (the first run of a pair can pay for the page cache, a
        # just-finished run's leftovers or the machine's state); pairs stay back to back
        patched_first = i % 2 == 1 and bool(base_runs) and base_runs[0].ok
        if not patched_first and (not base_runs or (base_runs[0].ok and len(base_runs) <= i)):
            base_runs.append(_trial(run, base, "baseline", i, policy, on_progress))
        if base_runs[0].status == "out_of_memory":
            ref_runs.append(_trial(run, reference, "reference", i, policy, on_progress))
        b_runs.append(_trial(run, spec_b, "patched", i, policy, on_progress))
        if not b_runs[-1].ok:
            break  # a patched run that fails will not succeed on a second try: stop spending time
        why_not = proof(b_runs[-1]) if proof is not None else None
        if why_not is not None:
            break  # the fix did not act: more trials would only time the baseline twice
        if patched_first:
            base_runs.append(_trial(run, base, "baseline", i, policy, on_progress))
        i += 1
    arm_a = Arm("baseline", base, tuple(base_runs))
    arm_b = Arm("patched", spec_b, tuple(b_runs))
    arm_r = Arm("reference (no memory budget)", reference, tuple(ref_runs)) if ref_runs else None
    exp = _judge(fix, arm_a, arm_b, arm_r, policy)
    why_not = proof(b_runs[-1]) if proof is not None and b_runs and b_runs[-1].ok else None
    if why_not is not None:
        verdict = judged(Why.NOT_ACTED, said=why_not)
        exp = replace(exp, kept=False, not_applied=why_not, reason=verdict.reason, outcome=verdict)
    return exp


def _checked(
    fix: Fix, base: SpecT, spec_b: SpecT, b: RunOutcome, policy: Policy, proof: ProofFn | None
) -> Experiment[SpecT]:
    """A check (``optimize --check``): the patched run, whether the fix acted in it, and no verdict."""
    if not b.ok:
        error = (b.error or "").strip().splitlines()
        verdict = judged(Why.RUN_ENDED, status=b.status, error=error[0] if error else "")
    else:
        why_not = proof(b) if proof is not None else None
        verdict = (
            judged(Why.NOT_ACTED, said=why_not) if why_not is not None else judged(Why.CHECKED)
        )
    return Experiment(
        fix=fix,
        baseline=Arm("baseline", base, ()),
        patched=Arm("patched", spec_b, (b,)),
        reference=None,
        ratio=None,
        loss_delta=None,
        loss_step=None,
        kept=False,
        reason=verdict.reason,
        policy=policy,
        outcome=verdict,
        not_applied=verdict.params.get("said") if verdict.why is Why.NOT_ACTED else None,
        inconclusive=verdict.detail if verdict.why is Why.CHECKED else None,
    )


def _trial(
    run: RunFn[SpecT], spec: SpecT, arm: str, i: int, policy: Policy, on_progress: ProgressFn | None
) -> RunOutcome:
    here = Progress(
        "trial", arm=arm, trial=i + 1, trials=policy.trials, max_trials=policy.max_trials
    )

    def relay(progress: dict[str, Any]) -> None:
        if on_progress is not None:
            on_progress(here.with_run(progress))

    relay({})
    return run(spec, relay)


def _judge(
    fix: Fix, a: Arm[SpecT], b: Arm[SpecT], ref: Arm[SpecT] | None, policy: Policy
) -> Experiment[SpecT]:
    timed: Arm[SpecT] = ref if ref is not None else a
    ratio = (
        throughput_ratio(timed.trials, b.trials, policy.n_boot, policy.level, policy.seed)
        if timed.trials and b.trials
        else None
    )
    judged_pairs: PairJudgement | None = None
    if ref is None and a.status == "ok" and b.status == "ok" and ratio is not None:
        judged_pairs = judge_pairs(
            a.outcomes,
            b.outcomes,
            policy.trials,
            1 + policy.min_gain,
            lambda x, y: throughput_ratio(x, y, policy.n_boot, policy.level, policy.seed),
        )
        ratio = judged_pairs.ratio
    loss_step, loss_delta = loss_parity(timed.outcomes, b.outcomes)
    loss_ok = (
        loss_delta is None
        or loss_step is None
        or loss_delta
        <= policy.loss_tolerance * max(abs(final_loss(timed.outcomes, loss_step)), 1e-8)
    )
    loss_text = (
        "; loss not checked (the launcher saw no loss)"
        if loss_delta is None
        else f"; loss (mean of {LOSS_WINDOW} steps to {loss_step}) {loss_delta:+.4f}"
    )
    loss_text += "".join(
        f"; {n}" for n in dict.fromkeys(n for o in (*timed.outcomes, *b.outcomes) for n in o.notes)
    )
    baseline_status = (
        a.outcomes[0].status if a.outcomes else "not run"
    )  # later flaky runs are just untimed
    if b.status != "ok":
        error = b.error.strip().splitlines()[0] if b.error and b.error.strip() else ""
        verdict = judged(Why.RUN_ENDED, status=b.status, error=error)
    elif baseline_status != "ok":
        budget = b.spec.memory_budget_mb
        within = budget is None or (b.peak_memory_mb or 0.0) <= budget
        cost = (
            f"; {1 / ratio.point - 1:+.0%} time per sample vs the unbudgeted reference"
            if ratio
            else ""
        )
        peak = (
            f" within the {budget} MB budget (peak {b.peak_memory_mb:.0f} MB)"
            if budget and b.peak_memory_mb
            else ""
        )
        verdict = (
            _rated(
                Why.RUNS_LOSS_BREAKS,
                ratio,
                None,
                loss=loss_text,
                delta=loss_delta,
                tolerance=policy.loss_tolerance,
            )
            if not loss_ok
            else _rated(
                Why.TURNS_OK if within else Why.OVER_BUDGET,
                ratio,
                None,
                loss=loss_text,
                baseline_status=baseline_status,
                budget=peak,
                cost=cost,
            )
        )
    else:
        assert ratio is not None
        edge = (
            1 + policy.min_gain
        )  # the low end is read against the keep threshold: enough digits to see the side
        interval = f"{ratio.point:.2f}x, {policy.level:.0%} interval [{beside(ratio.low, edge)}, {ratio.high:.2f}]"
        headroom = _headroom(a, b, ratio, policy) if fix.bottleneck is Bottleneck.MEMORY else None
        gain = ratio.low > 1 + policy.min_gain or headroom is not None
        loss_text += judged_pairs.note_text() if judged_pairs is not None else ""
        text = {"interval": interval, "loss": loss_text}
        if judged_pairs is not None and judged_pairs.inconclusive and headroom is None:
            verdict = _rated(
                judged_pairs.inconclusive_why or Why.CONTENDED,
                ratio,
                edge,
                said=judged_pairs.inconclusive,
                **text,
            )
        elif not gain and headroom is None and loss_ok and leans(ratio.point, edge):
            flips = ratio.pairs and min(ratio.pairs) < 1.0
            why = (
                f"pairs disagree: {ratio.pairs_faster} of {len(ratio.pairs)} saw the patched run faster "
                f"({', '.join(f'{r:.2f}x' for r in ratio.pairs)})"
                if flips
                else f"the trials lean towards a gain they cannot show: {ratio.point:.2f}x clears {edge:.2f}x but the "
                f"interval's low end does not after {len(b.outcomes)} pairs (more --trials would tell)"
            )
            verdict = _rated(
                Why.PAIRS_DISAGREE if flips else Why.LEAN, ratio, edge, said=why, **text
            )
        elif headroom is not None and loss_ok:
            verdict = _rated(Why.MEMORY_HEADROOM, ratio, edge, headroom=headroom, **text)
        elif not gain:
            code = Why.SLOWER if slower(ratio.point, ratio.high) else Why.NO_GAIN
            verdict = _rated(code, ratio, edge, **text)
        elif not loss_ok:
            verdict = _rated(Why.LOSS_BREAKS, ratio, edge, tolerance=policy.loss_tolerance, **text)
        else:
            verdict = _rated(Why.GAIN, ratio, edge, **text)
    inconclusive = verdict.params.get("said") if verdict.word is Word.INCONCLUSIVE else None
    return Experiment(
        fix=fix,
        baseline=a,
        patched=b,
        reference=ref,
        ratio=ratio,
        loss_delta=loss_delta,
        loss_step=loss_step,
        kept=verdict.kept,
        reason=verdict.reason,
        policy=policy,
        inconclusive=inconclusive,
        outcome=verdict,
        left_out=judged_pairs.left_out if judged_pairs is not None else (),
    )


def _rated(why: Why, ratio: RatioEstimate | None, edge: float | None, **params: Any) -> Outcome:
    """The Outcome of ``why`` on ``ratio`` (the interval's ends with it)."""
    if ratio is None:
        return judged(why, edge=edge, **params)
    return judged(why, ratio.point, ratio.low, ratio.high, edge, **params)


def _headroom(a: Arm[Spec], b: Arm[Spec], ratio: RatioEstimate, policy: Policy) -> str | None:
    """For a memory fix on a baseline that already runs: the peak it saves, if it saves at least
    ``min_peak_drop`` at no more than ``max_memory_cost`` per sample (interval's lower bound); else None."""
    if a.peak_memory_mb is None or b.peak_memory_mb is None:
        return None
    if (
        b.peak_memory_mb > a.peak_memory_mb * (1 - policy.min_peak_drop)
        or ratio.low < 1 - policy.max_memory_cost
    ):
        return None
    return f"peak {a.peak_memory_mb:.0f} -> {b.peak_memory_mb:.0f} MB"


def loss_parity(
    a: Sequence[RunOutcome], b: Sequence[RunOutcome], window: int = LOSS_WINDOW
) -> tuple[int | None, float | None]:
    """``(step, patched − baseline)``: the arms' median final loss at the last step every run of both reached,
    each run's final loss being its mean over the last ``window`` steps up to there (one mini-batch's loss
    is too noisy to compare)."""
    if not [o for o in a if o.losses] or not [o for o in b if o.losses]:
        return None, None
    step = min(len(o.losses) for o in (*a, *b) if o.losses) - 1
    return step, final_loss(b, step, window) - final_loss(a, step, window)


def final_loss(outcomes: Sequence[RunOutcome], step: int, window: int = LOSS_WINDOW) -> float:
    """Median over runs of the mean loss over steps ``step - window + 1 .. step``."""
    lo = max(step - window + 1, 0)
    return float(np.median([np.mean(o.losses[lo : step + 1]) for o in outcomes if o.losses]))
