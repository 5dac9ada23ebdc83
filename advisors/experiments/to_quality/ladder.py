"""What ``optimize --to-quality`` found: one :class:`QualityRound` per candidate judged, in a
:class:`QualityLadder` with the target, the budget and the baseline's runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from advisors.experiments.results.outcome import WORD_OF, Why
from advisors.experiments.to_quality.runs import QualityRun, QualitySpec
from advisors.quality import early_stop
from advisors.quality.arms import TimeToTarget
from advisors.quality.candidates import Candidate
from advisors.quality.goodput import GoodputPlan, Prediction
from advisors.quality.target import Budget, Target


@dataclass(frozen=True)
class QualityRound:
    """One candidate judged at the target: ``time_to_target`` for a run change, ``early_stopping`` for early
    stopping (measured on the baseline's curves); an advice-only candidate has neither."""

    round: int
    candidate: Candidate
    spec: QualitySpec | None
    runs: tuple[QualityRun, ...]
    time_to_target: TimeToTarget | None
    early_stopping: early_stop.EarlyStopping | None
    kept: bool
    reason: str
    applied: Mapping[str, Any] | None = (
        None  # what was injected (a script's candidate): knobs, evidence, sites
    )
    not_applied: str | None = None  # why the change did not act: then it was not judged
    predicted: Prediction | None = (
        None  # from the noise scale, before the arm ran (batch or accumulation × k)
    )
    baseline_runs: tuple[
        QualityRun, ...
    ] = ()  # the baseline's seeds run interleaved with this arm's
    inconclusive: str | None = (
        None  # why the verdict cannot stand (other programs' load): neither kept nor not
    )
    judged_against: tuple[
        int, ...
    ] = ()  # baseline_runs' places in the ladder's ``interleaved`` baseline runs

    @property
    def outcome(self) -> str:
        """The round's one word: kept, rejected, inconclusive, not applied, trade-off, or advice."""
        return WORD_OF[self.outcome_why].value

    @property
    def outcome_why(self) -> Why:
        """The round's reason code: its judgement's (time to target, or early stopping)."""
        if self.not_applied is not None:
            return Why.NOT_ACTED
        if self.early_stopping is not None:
            return self.early_stopping.why
        if self.time_to_target is None:
            return Why.ADVICE_ONLY
        return self.time_to_target.why


@dataclass(frozen=True)
class QualityLadder:
    target: Target
    budget: Budget
    seeds: int
    start: QualitySpec
    baseline: tuple[QualityRun, ...]
    rounds: tuple[QualityRound, ...]
    advice: tuple[Candidate, ...]
    plan: GoodputPlan | None = None  # the noise scale and what it predicts (None: not measured)
    whole_runs: tuple[
        QualityRun, ...
    ] = ()  # the baseline to its own end: where early stopping is judged
    whole_budget: Budget | None = None
    whole_label: str | None = None  # how far the whole run went, in words
    one_run: bool = (
        False  # the baseline's seeds gave the same curve: they are one run (fair.one_run)
    )
    start_band: tuple[float, float] | None = None  # the baseline's raw values over its first points
    interleaved: tuple[
        QualityRun, ...
    ] = ()  # every baseline run of the interleave, shared by all the arms
    interleaved_seeds: tuple[int, ...] = ()  # the seed of each
    floor: str | None = (
        None  # why the target sits on the baseline's floor (fair.on_floor), None when it does not
    )

    @property
    def kept(self) -> tuple[QualityRound, ...]:
        return tuple(r for r in self.rounds if r.kept)
