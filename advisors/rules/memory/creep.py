"""MEM008 — memory creeps up a step at a time: the loop keeps something every step that it should let go."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, ramp
from advisors.synthetic import observation, run_facts
from profilers.run.captures import CaptureTrigger

_STEP = {"forward": 0.4, "backward": 0.5}
_NUMBERS = {
    "grown_mb": 150.0,
    "window_steps": 50.0,
    "mb_per_step": 3.0,
    "r2": 0.99,
    "start_mb": 900.0,
    "end_mb": 1050.0,
    "limit_mb": 20_000.0,
    "steps_left": 6300.0,
}


def _capture(kind: str = "memory", **numbers: float) -> CaptureTrigger:
    return CaptureTrigger(
        kind=kind,
        step=120,
        reason="memory +150 MiB over 50 steps, steadily",
        numbers={**_NUMBERS, **numbers} if kind == "memory" else {},
    )


class MemoryCreep(Rule):
    """A watched run profiled itself because its memory grew steadily (``stepwise_agent.trigger``'s memory rule:
    a straight line fits the last steps' memory and it never gave back more than a tenth of the growth). A few
    profiled steps cannot show a trend — the trace of a leaking step looks like any other — so this rule judges the
    numbers the run's own agent measured over the whole window (``capture.json``'s trigger), not the trace.

    Evidence: the growth, the steps it took, MiB a step, the line's R², the limit and the steps left to it.
    Severity 1.0: the run itself is at stake (it ends out of memory when the steps left run out), whatever the
    step's time is made of. Thresholds: confidence ramps with the fit, ``min_r2`` (0.8) → ``high_r2`` (0.98).

    No automatic fix: what is kept is in the user's loop — a list of tensors that still hold their autograd graph
    (``features``, ``loss``), a cache keyed by step, a growing log. Keep ``.item()``/``.detach().cpu()`` of what
    the loop records, or let it go.
    """

    id, name, bottleneck = "MEM008", "memory-creep", Bottleneck.MEMORY
    cause = "capacity"
    thresholds = {"min_r2": 0.8, "high_r2": 0.98}
    fix_id = None
    fires = (
        Example(
            "a watched run's memory grew 150 MiB over 50 steps, 3 MiB a step, R² 0.99",
            lambda: observation(_STEP, device="cpu", run=run_facts(trigger=_capture())),
            fix=None,
            severity=1.0,
        ),
    )
    passes = (
        Example(
            "a capture fired by a step-time rise",
            lambda: observation(_STEP, device="cpu", run=run_facts(trigger=_capture("step_time"))),
        ),
        Example(
            "a memory trend that a line does not fit",
            lambda: observation(_STEP, device="cpu", run=run_facts(trigger=_capture(r2=0.5))),
        ),
        Example("an uploaded trace", lambda: observation(_STEP, device="cpu")),
    )

    def missing(self, f: Facts) -> str | None:
        return None  # any other input is not a memory capture: the rule does not apply (nothing is missing)

    def check(self, f: Facts) -> Finding | None:
        trigger = f.run.trigger if f.run else None
        if trigger is None or trigger.kind != "memory":
            return None
        n = trigger.numbers
        r2, grown, per_step = n.get("r2", 0.0), n.get("grown_mb", 0.0), n.get("mb_per_step", 0.0)
        if r2 < self.t["min_r2"] or grown <= 0 or per_step <= 0:
            return None
        left = n.get("steps_left")
        until = (
            f" At this rate the limit of {n['limit_mb']:,.0f} MiB is reached in about {left:,.0f} steps."
            if left is not None and n.get("limit_mb")
            else ""
        )
        return self.finding(
            f,
            severity=1.0,
            confidence=ramp(r2, self.t["min_r2"], self.t["high_r2"]),
            message=(
                f"Memory grew {grown:,.0f} MiB over {n.get('window_steps', 0):.0f} steps up to step "
                f"{trigger.step:,}, steadily ({per_step:.1f} MiB a step, R² {r2:.2f}) and never gave it back: "
                f"the loop keeps something every step (tensors that still hold their graph, a growing "
                f"list or cache). Record .item() or .detach().cpu() of what it keeps.{until}"
            ),
            evidence={"trigger_step": trigger.step, **{k: v for k, v in n.items()}},
        )
