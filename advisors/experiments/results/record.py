"""The one record of an experiment — an Apply, or one round of a ladder — that every surface renders.

Computed once, when the experiment is judged (:mod:`advisors.experiments.results.recording`), and stored as JSON in the
experiment's folder (``profilers.store.experiments``); the Advisor card, the Runs list and its trial table, the
ladder table and chart, the reports and ``optimize --json`` read it and compute nothing of their own. So one
Apply has one outcome word, one samples/s before and after (:func:`stepwise_agent.steady.samples_per_s`, the
median over an arm's trials), one speed-up (after ÷ before) with its interval, and one upper bound that says
which diagnosis (of which run) it comes from.

The outcome words: ``kept``, ``rejected``, ``inconclusive`` (the trials could not tell: other programs competed,
or the pairs disagreed), ``not applied`` (the fix never acted: nothing was judged) and ``failed`` (the patched
run crashed, ran out of memory or was killed). ``outcome_text`` is the word with its why, as
printed, and ``outcome_why`` the verdict's reason code
(:class:`~advisors.experiments.results.outcome.Why`); code reads the word and the code, never the
text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, Mapping, Sequence

from advisors.experiments.results.memory_peaks import MemoryRecord
from advisors.experiments.results.words import from_text

SCHEMA = 2
# A round's baseline is the code its previous round kept (or its previous attempt's baseline): when its samples/s
# is this far (relative, either way) from that earlier measurement of the same code, the record says so — the
# machine changed between them, and samples/s read across rounds would mislead.
BASELINE_MOVED = 0.25
UNEXPLAINED = (
    "the bound was wrong for this run: the time it counts was mis-attributed, or the "
    "fix also acted elsewhere in the step"
)
# the step-time words of :class:`~advisors.experiments.results.outcome.Word`, as records store them
OutcomeWord = Literal["kept", "rejected", "inconclusive", "not applied", "failed"]
OUTCOMES: tuple[str, ...] = ("kept", "rejected", "inconclusive", "not applied", "failed")
Kind = Literal["apply", "ladder round"]


@dataclass(frozen=True)
class BoundRecord:
    """The most a fix could gain, and where that number comes from: the diagnosis of ``baseline_run``."""

    speedup: float | None
    assumption: (
        str | None
    )  # what must hold for the bound to be reached ("if the time drawing batches vanished")
    baseline: str  # which diagnosis, in words ("the diagnosis of round 2's baseline run")
    baseline_run: str | None = None  # the run id that diagnosis read
    exceeded: bool = (
        False  # the measured speed-up is above the bound: the bound was wrong for this run
    )
    # why, in words: what the arms' steps show, else what can make it so
    exceeded_why: str | None = None
    measured: float | None = None  # the measured speed-up it was read against

    @property
    def text(self) -> str:
        """``8.96× (the diagnosis of run 20261127-…; if the time drawing batches vanished)``, and
        when a measured gain passed it, ``— measured 9.32× is above it: why`` (never a bare bound
        beside a larger gain)."""
        if self.speedup is None:
            return "none"
        why = f"; {self.assumption}" if self.assumption else ""
        beyond = self.beyond
        over = (
            f" — measured {beyond['measured']:.2f}× is above it: {beyond['why']}" if beyond else ""
        )
        return f"{self.speedup:.2f}× ({self.baseline}{why}){over}"

    @property
    def beyond(self) -> dict[str, Any] | None:
        """``{bound, measured, why}`` when the measured gain passed the bound, else ``None``."""
        if not self.exceeded or self.speedup is None or self.measured is None:
            return None
        return {
            "bound": self.speedup,
            "measured": self.measured,
            "why": self.exceeded_why or UNEXPLAINED,
        }


@dataclass(frozen=True)
class TrialRecord:
    """One trial run an experiment's verdict rests on: its part, pair, round and fix, and its own numbers — the
    same ones its run shows in the Runs list (its measured steps' samples/s and median step)."""

    run_id: str | None
    role: str  # baseline | patched | reference
    pair: int  # the back-to-back pair it belongs to, from 1
    round: int | None
    fix_id: str
    status: str
    samples_per_s: float | None
    step_time_ms: float | None
    steps: int  # measured steps
    peak_memory_mb: float | None = None
    others_cores: float | None = None  # cores other programs took while its steps were timed
    error: str | None = None
    rate_unit: str = (
        "samples/s"  # "steps/s" when the script's batches were not seen (no DataLoader)
    )
    in_verdict: bool = (
        True  # False: its pair was left out of the verdict's medians (other programs competed)
    )


@dataclass(frozen=True)
class ExperimentRecord:
    """An Apply or a ladder round, as every surface shows it (see the module docs)."""

    kind: Kind
    fix_id: str
    fix_title: str
    bottleneck: str  # the diagnosis' bottleneck the fix was tried for
    outcome: OutcomeWord
    outcome_text: str  # the word with its why: "rejected: slower, 0.52×, 95% interval [0.41, 0.63]"
    reason: str  # the verdict's whole sentence (interval, loss, contention notes)
    outcome_why: str | None = None  # the verdict's reason code (a Why: "no_gain", "contended", …)
    round: int | None = None
    rule: str | None = None
    acts_on: str | None = (
        None  # what the fix itself acts on (a DataLoader fix tried for a compute verdict: data)
    )
    before_label: str = (
        "baseline"  # or "reference (no memory budget)" when the baseline could not be timed
    )
    rate_unit: str = "samples/s"  # "steps/s" when the script's batches were not seen: then before/after count steps
    before_samples_per_s: float | None = None
    after_samples_per_s: float | None = None
    speedup: float | None = None  # after ÷ before samples/s
    low: float | None = None
    high: float | None = None
    level: float = 0.95
    min_gain: float = 0.03
    pair_ratios: tuple[float, ...] = ()
    before_step_ms: float | None = None  # the arms' times per step (× samples/s = the batch)
    after_step_ms: float | None = None
    # the arms' typical (median) steps: shown beside, never the speed-up
    before_typical_ms: float | None = None
    after_typical_ms: float | None = None
    bound: BoundRecord | None = None
    loss_delta: float | None = None
    loss_step: int | None = None
    loss_tolerance: float = 0.05
    not_applied: str | None = None
    inconclusive: str | None = None
    trials_per_arm: int = 3  # the runs asked for per arm (a re-run's --trials)
    # the back-to-back pairs the verdict's medians were taken over
    runs_in_verdict: int | None = None
    cumulative_speedup: float | None = (
        None  # a kept ladder round: the product of the kept speed-ups so far
    )
    spec_change: Mapping[str, Any] = field(
        default_factory=dict
    )  # knob/flag → its value in the patched arm
    injected: bool = False  # injected into a user's script at boot (the file was never written)
    where: str | None = None  # file:line of the user's code the change belongs at
    sites: tuple[str, ...] = ()
    change: Mapping[str, Any] | None = (
        None  # a script fix that acted: the edit measured {kind, file, line, text}
    )
    snippet: str = ""
    trials: tuple[TrialRecord, ...] = ()
    baseline_drift: float | None = (
        None  # a ladder round: its baseline's samples/s ÷ the same code's last measurement
    )
    baseline_moved: str | None = None  # the sentence, when that drift is beyond BASELINE_MOVED
    #: a memory fix: each arm's peaks (live tensors, the run's own) beside its step time
    memory: MemoryRecord | None = None

    @property
    def label(self) -> str:
        """What a list shows for it: ``kept 1.42×``, ``inconclusive 0.98×``, ``not applied``, ``failed``."""
        judged = self.outcome in ("kept", "rejected", "inconclusive") and self.speedup is not None
        return f"{self.outcome} {self.speedup:.2f}×" if judged else self.outcome

    @property
    def change_to_make(self) -> Mapping[str, Any] | None:
        """The edit a user should make: a kept fix's measured change (a rejected one's is no advice)."""
        return self.change if self.outcome == "kept" else None

    @property
    def interval_text(self) -> str | None:
        """``1.42× [1.31, 1.55]`` (``None`` when nothing was measured)."""
        if self.speedup is None:
            return None
        return f"{self.speedup:.2f}×" + (
            f" [{self.low:.2f}, {self.high:.2f}]" if self.low is not None else ""
        )

    @property
    def memory_text(self) -> str | None:
        """A memory fix's peaks beside its step time, as every surface says it (``None``: no memory
        was recorded): ``live host tensors 612 → 210 MB (-66%); run peak 900 → 700 MB; step …``."""
        if self.memory is None:
            return None
        return self.memory.text(self.before_step_ms, self.after_step_ms) or None

    @property
    def runs_per_arm(self) -> int:
        """The runs per arm the verdict rests on (what every surface says); the asked count on old
        records."""
        return self.runs_in_verdict or self.trials_per_arm

    @property
    def beyond_bound(self) -> dict[str, Any] | None:
        """``{bound, measured, why}`` when the measured gain passed the fix's upper bound."""
        return self.bound.beyond if self.bound is not None else None

    def to_json(self) -> dict[str, Any]:
        memory = self.memory.to_json() if self.memory is not None else None
        return {**_plain(asdict(self)), "beyond_bound": self.beyond_bound, "memory": memory}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExperimentRecord:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        kw["bound"] = (
            BoundRecord(**_known(BoundRecord, data["bound"])) if data.get("bound") else None
        )
        kw["trials"] = tuple(
            TrialRecord(**_known(TrialRecord, t)) for t in data.get("trials") or ()
        )
        kw["pair_ratios"] = tuple(data.get("pair_ratios") or ())
        kw["memory"] = MemoryRecord.from_json(data.get("memory"))
        kw["sites"] = tuple(data.get("sites") or ())
        if "outcome_why" not in data:  # stored before verdicts were data: its code from its text
            kw["outcome_why"] = from_text(
                data.get("outcome") == "kept",
                data.get("reason"),
                data.get("not_applied"),
                data.get("speedup"),
            ).why.value
        return cls(**kw)


@dataclass(frozen=True)
class Attempt:
    """A fix a ladder did not measure: advice you apply yourself, or one an earlier Apply already measured."""

    fix_id: str
    fix_title: str
    why: str
    round: int | None = None
    bottleneck: str | None = None
    rule: str | None = None
    snippet: str = ""


@dataclass(frozen=True)
class LadderRecord:
    """A ladder: each round's record, the total kept speed-up, why it stopped, and what it left to you."""

    rounds: tuple[ExperimentRecord, ...]
    total_speedup: float
    rounds_asked: int | None
    why_stopped: str
    complete: bool  # every round asked for kept a fix
    last_bottleneck: str | None = None
    advice: tuple[Attempt, ...] = ()
    not_retried: tuple[Attempt, ...] = ()
    diagnosis: TrialRecord | None = (
        None  # the run round 1 diagnosed (role "diagnosis"): its bounds' baseline
    )

    @property
    def label(self) -> str:
        return f"ladder {self.total_speedup:.2f}×"

    @property
    def trials(self) -> tuple[TrialRecord, ...]:
        """Every run of the ladder, in the order they ran: round 1's diagnosis run, then every round's trials."""
        return (
            *((self.diagnosis,) if self.diagnosis else ()),
            *(t for r in self.rounds for t in r.trials),
        )

    @property
    def steps(self) -> list[dict[str, Any]]:
        """The ladder chart: 1 at the start, then the running product after each kept fix (each round times
        its own baseline, so the arms' raw step times are never chained)."""
        kept = [r for r in self.rounds if r.outcome == "kept"]
        return ([{"label": "start", "speedup": 1.0}] if self.rounds else []) + [
            {"label": f"+ {r.fix_title}", "speedup": r.cumulative_speedup} for r in kept
        ]

    def to_json(self) -> dict[str, Any]:
        # each round as its own record writes itself (its memory peaks under their JSON names)
        return {**_plain(asdict(self)), "rounds": [r.to_json() for r in self.rounds]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LadderRecord:
        return cls(
            rounds=tuple(ExperimentRecord.from_json(r) for r in data.get("rounds") or ()),
            total_speedup=float(data.get("total_speedup") or 1.0),
            rounds_asked=data.get("rounds_asked"),
            why_stopped=str(data.get("why_stopped") or ""),
            complete=bool(data.get("complete")),
            last_bottleneck=data.get("last_bottleneck"),
            advice=tuple(Attempt(**_known(Attempt, a)) for a in data.get("advice") or ()),
            not_retried=tuple(Attempt(**_known(Attempt, a)) for a in data.get("not_retried") or ()),
            diagnosis=TrialRecord(**_known(TrialRecord, data["diagnosis"]))
            if data.get("diagnosis")
            else None,
        )


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _plain(value: Any) -> Any:
    """Tuples as lists, so the JSON read back compares equal to the JSON written."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def baseline_moves(rounds: Sequence[ExperimentRecord]) -> tuple[ExperimentRecord, ...]:
    """The rounds of a ladder, each with how far its baseline's samples/s moved from the last measurement of the
    same code (``baseline_drift``: the previous attempt's baseline in the same round, else the previous round's
    kept patched runs) and, beyond :data:`BASELINE_MOVED`, the sentence that says so (``baseline_moved``)."""
    out: list[ExperimentRecord] = []
    for x in rounds:
        prev = out[-1] if out else None
        earlier, named = None, ""
        if prev is not None and prev.round == x.round and prev.before_label == "baseline":
            earlier, named = (
                prev.before_samples_per_s,
                f"round {x.round}'s previous attempt's baseline",
            )
        elif (
            prev is not None
            and prev.outcome == "kept"
            and prev.round is not None
            and x.round == prev.round + 1
        ):
            earlier, named = (
                prev.after_samples_per_s,
                f"round {prev.round}'s patched runs ({prev.fix_title}, kept)",
            )
        now = x.before_samples_per_s
        if (
            x.before_label != "baseline"
            or prev is None
            or prev.rate_unit != x.rate_unit
            or not earlier
            or not now
        ):
            out.append(x)
            continue
        drift = now / earlier
        moved = None
        if max(drift, 1 / drift) > 1 + BASELINE_MOVED:
            unit = x.rate_unit
            moved = (
                f"baseline moved: round {x.round}'s baseline ran {now:.1f} {unit} where {named} ran the same "
                f"code at {earlier:.1f} {unit} ({drift:.2f}×, beyond the {BASELINE_MOVED:.0%} two measurements "
                "of one code may differ): the machine changed between them (other programs, clocks, caches), "
                "so read each round's speed-up against its own baseline, not samples/s across rounds"
            )
        out.append(replace(x, baseline_drift=round(drift, 4), baseline_moved=moved))
    return tuple(out)


def complete(rounds: Sequence[ExperimentRecord], asked: int | None) -> bool:
    """Every round asked for kept a fix (the ladder's success)."""
    return asked is not None and len({r.round for r in rounds if r.outcome == "kept"}) >= asked


def why_stopped(
    rounds: Sequence[ExperimentRecord], asked: int | None, bottleneck: str | None
) -> str:
    """Why a ladder of ``asked`` rounds ended where it did, in one sentence: "All 2 rounds ran; round 2 …" when
    the last asked round kept nothing, "Stopped in round 2 of 3: …" when it ended before (never "Stopped after
    round 1" above a table showing round 2). Its fixes are named by what they act on, not by the bottleneck of
    the diagnosis (a DataLoader fix tried for a compute verdict is not a compute fix)."""
    kept_rounds = sorted({int(r.round or 0) for r in rounds if r.outcome == "kept"})
    done = len(kept_rounds)
    plural = "s" if asked != 1 else ""
    if asked is not None and done >= asked:
        return f"All {asked} round{plural} ran, each with a kept fix."
    stopped_at = done + 1
    tried = [r for r in rounds if int(r.round or 0) == stopped_at]
    where = f"the {bottleneck} bottleneck" if bottleneck else "what the diagnosis found"
    if asked is not None and stopped_at >= asked:
        head, it = f"All {asked} round{plural} ran; ", f"round {stopped_at} "
    else:
        head, it = (
            f"Stopped in round {stopped_at}{f' of {asked}' if asked is not None else ''}: ",
            "it ",
        )
    if not tried:
        return f"{head}{it}found no fix left for {where} that fits this run."
    last = tried[-1]
    if last.outcome == "failed":
        return f"{head}round {stopped_at}'s fix ({last.fix_title}) {last.outcome_text}."
    kinds = {
        k: sum(1 for r in tried if (r.acts_on or r.bottleneck) == k)
        for k in dict.fromkeys(r.acts_on or r.bottleneck for r in tried)
    }
    n = len(tried)
    aimed = (
        f"for {where}"
        if list(kinds) == [bottleneck]
        else f"({', '.join(f'{c} on {k}' for k, c in kinds.items())}) for {where}"
    )
    return (
        f"{head}{it}tried {n} fix{'es' if n != 1 else ''} {aimed} and kept none "
        f"(last: {last.fix_title}, {last.outcome_text})."
    )
