"""Where an experiment or a ladder stands: the typed :class:`Progress` they report (instead of loose dicts).

An experiment reports one value per change (a trial started, a step of its run done); the ladder tags the
experiment's values with its round and fix and adds its own phases. The dashboard stores the latest value
with the experiment (``to_dict``/``from_dict``), so a page opened later, in any session, shows it too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, Literal, Mapping

Phase = Literal["starting", "diagnose", "diagnosis_run", "experiment", "trial"]
PHASES: tuple[str, ...] = ("starting", "diagnose", "diagnosis_run", "experiment", "trial")


@dataclass(frozen=True)
class Progress:
    """One report. ``arm``/``trial``/``trials``: the trial under way (``trial`` counts from 1); ``step`` and
    ``total_steps``: its run's progress (``None`` until its first step); ``round``/``fix``: the ladder's."""

    phase: Phase = "starting"
    round: int | None = None
    fix: str | None = None
    arm: str | None = None
    trial: int | None = None
    trials: int | None = None
    step: int | None = None
    total_steps: int | None = None
    max_trials: int | None = (
        None  # the most pairs it may run, when pairs disagree or were competed for
    )
    # its run has no step yet: "waiting for the first step (N s; the script printed: …)"
    waiting: str | None = None

    def tagged(self, round_: int, fix: str | None) -> "Progress":
        return replace(self, round=round_, fix=fix)

    def with_run(self, run_progress: Mapping[str, Any] | None) -> "Progress":
        """This report with the trial run's own ``progress.json`` (step, total_steps) folded in."""
        p = run_progress or {}
        waiting = p.get("waiting")
        return replace(
            self,
            step=_int(p.get("step")),
            total_steps=_int(p.get("total_steps")),
            waiting=str(waiting) if waiting and not p.get("step") else None,
        )

    @property
    def describe(self) -> str:
        """One line: ``round 2 · fix amp · patched run 1 of 3 · step 4 of 20``."""
        parts = []
        if self.round is not None:
            parts.append(f"round {self.round}")
        if self.fix:
            parts.append(f"fix {self.fix}")
        if self.phase == "trial":
            parts.append(self.trial_text)
        elif self.phase in ("diagnose", "diagnosis_run"):
            parts.append("diagnosing a fresh run")
        elif self.phase == "starting":
            parts.append("starting…")
        if self.step is not None:
            parts.append(
                f"step {self.step} of {self.total_steps}"
                if self.total_steps
                else f"step {self.step}"
            )
        elif self.waiting:
            parts.append(self.waiting)
        return " · ".join(parts)

    @property
    def trial_text(self) -> str:
        """``patched run 2 of 3``; past the pairs planned, ``pair 4 (extra: the pairs disagreed or were competed
        for) · patched run`` — never "run 4 of 3"."""
        if self.trial is not None and self.trials is not None and self.trial > self.trials:
            most = f" of at most {self.max_trials}" if self.max_trials else ""
            return (
                f"pair {self.trial}{most} (extra: the pairs disagreed or other programs competed) · "
                f"{self.arm} run"
            )
        return f"{self.arm} run {self.trial} of {self.trials}"

    @property
    def fraction(self) -> float:
        """Rough completion of an experiment: finished runs of the 2 × trials it plans, plus the current run's
        steps (0 outside a trial: a ladder's length is not known in advance). Past the planned pairs, of the
        most it may run: the bar is never full while a run is still going."""
        if self.phase != "trial" or not self.trials:
            return 0.0
        within = (self.step or 0) / max(self.total_steps or 1, 1)
        pair = (self.trial or 1) - 1
        second = (
            "baseline" if pair % 2 else "patched"
        )  # pairs alternate A B, B A (advisors.experiments.experiment)
        index = 2 * pair + (1 if self.arm == second else 0)
        planned = self.trials
        if self.trial is not None and self.trial > self.trials:
            planned = max(self.max_trials or 0, self.trial)
        return min((index + within) / (2 * planned), 0.99)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "Progress":
        """Tolerant: a missing, foreign or damaged value reads as ``starting``."""
        if not isinstance(data, Mapping):
            return cls()
        phase = data.get("phase") if data.get("phase") in PHASES else "starting"
        kw: dict[str, Any] = {"phase": phase}
        for f in fields(cls):
            if f.name in ("round", "trial", "trials", "step", "total_steps"):
                kw[f.name] = _int(data.get(f.name))
            elif f.name in ("fix", "arm", "waiting"):
                kw[f.name] = None if data.get(f.name) is None else str(data.get(f.name))
        return cls(**kw)


ProgressFn = Callable[[Progress], None]


def _int(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None
