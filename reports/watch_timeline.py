"""A watched run's timeline, for its live page and its report: every capture with its trigger, profiled steps and
verdict, and the whole run's points (:func:`profilers.run.step_records.timeline`, roll-ups included).

:func:`verdict` is the one place a capture's bottleneck and its line's words are read from its stored analysis:
the terminal line of ``stepwise watch``, its ``--json``, the live page and the report all say it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profilers.errors import StepwiseError
from profilers.run.captures import capture_records
from profilers.run.step_records import TIMELINE_COLUMNS, timeline
from profilers.store.files import read_json


def straggler(analysis: Any) -> tuple[int | None, str | None]:
    """The straggler a capture of several ranks found (:mod:`profilers.jobs.straggler`, through its breakdown):
    its rank (None: no rank marked) and the rule's sentence (None: one rank)."""
    b = getattr(analysis, "breakdown", None)
    if b is None or len(getattr(b, "ranks", ()) or ()) < 2:
        return None, None
    s = b.straggler
    return (s.rank if s is not None else None), b.straggler_call.reason


def verdict(capture: dict[str, Any], analysis: Any) -> tuple[str | None, str]:
    """The capture's bottleneck (None: not judged) and its line's words, from its stored analysis (a capture of
    a rank falling behind adds the straggler rule's sentence)."""
    d = getattr(analysis, "diagnosis", None)
    bottleneck = d.bottleneck.value if d is not None else None
    first, last = capture["steps"]
    said = (
        f"{bottleneck} — {d.binding.message}"
        if d is not None and d.binding is not None
        else bottleneck or (getattr(analysis, "advisor_note", None) or "not judged")
    )
    trigger = capture.get("trigger") or {}
    sentence = straggler(analysis)[1]
    if trigger.get("kind") == "rank_behind" and sentence:
        said += f" {sentence}"
    ranks = capture.get("ranks") or []
    return bottleneck, (
        f"step {int(trigger.get('step', first)):,}: {trigger.get('reason', '')}; captured steps "
        f"{first:,}–{last:,}"
        + (
            f" on ranks {', '.join(map(str, ranks))}"
            if len(ranks) > 1
            else f" on rank {capture['rank']}"
            if capture.get("rank")
            else ""
        )
        + f": {said}"
    )


def is_watched(run_dir: Path) -> bool:
    boot = read_json(run_dir / "boot.json")
    return isinstance(boot, dict) and isinstance(boot.get("watch"), dict)


def judged_captures(run_dir: Path) -> list[dict[str, Any]]:
    """:func:`profilers.run.captures.capture_records` with each stored capture's ``bottleneck`` and ``verdict``
    (its stored analysis: made once, outside the training process, then read back)."""
    from advisors.analysis import analyse

    out = []
    for capture in capture_records(run_dir):
        bottleneck, said = None, None
        if capture["run_id"] is not None and (run_dir.parent / capture["run_id"]).is_dir():
            try:
                analysis: Any = analyse(run_dir.parent / capture["run_id"], charts=False)
            except StepwiseError as err:
                analysis = None
                note = f" (the capture could not be analysed: {err})"
            bottleneck, said = verdict(capture, analysis)
            said += note if analysis is None else ""
        out.append({**capture, "bottleneck": bottleneck, "verdict": said})
    return out


def watch_extra(run_dir: Path) -> dict[str, Any] | None:
    """The report's ``watch``: ``captures`` (:func:`judged_captures`) and ``timeline`` (the whole run's points,
    :data:`profilers.run.step_records.TIMELINE_COLUMNS`); None for a run that was not watched."""
    if not is_watched(run_dir):
        return None
    points = timeline(run_dir)
    rows: list[dict[str, Any]] = []
    if not points.empty:
        clean = points[list(TIMELINE_COLUMNS)].astype(object).where(points.notna(), None)
        rows = [{str(k): v for k, v in r.items()} for r in clean.to_dict(orient="records")]
    return {"captures": judged_captures(run_dir), "timeline": rows}
