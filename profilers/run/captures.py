"""A watched run's captures, made runs of their own (outside the training process).

The agent (:mod:`stepwise_agent.watch`) writes each capture as ``RUN_DIR/captures/r{R}c{N}/``: a trace and, last,
``capture.json`` (rank, trigger, profiled steps [first, last], status). :func:`store_captures` — called by the
runner while the job runs and once more when it ends — turns every complete one into a stored run of kind
``launch`` with ``role: capture`` and the watched run as its ``parent``: its trace under ``tb/``, in
``steps.jsonl`` the rows of the steps the trigger judged (the trigger's ``judged_steps``, at least
:data:`stepwise_agent.trigger.RECENT`, up to the step it fired at, unprofiled: the capture's step time and telemetry are theirs) and of the profiled steps, the telemetry
of that time span, the watched run's ``launch.json``, ``agent.json`` and ``injected.json`` (its threads), and
``capture.json``. So a capture fired because another program took the cores is judged on the slowed steps'
telemetry (HOST004 names the other programs), not on the two or three samples of its profiled steps. So a capture is analysed like any other run (``advisors.analysis.analyse``
stores its analysis in it), listed by ``stepwise list`` as ``[capture of RUN]``, and linked from the watched run
(``captures/…/stored.json`` names it).

:func:`capture_records` lists the captures of a watched run in order, each with the run it became.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilers.run.records import RunResult, RunStatus, summarise_steps
from profilers.store.files import (
    read_json,
    read_jsonl,
    steps_frame,
    telemetry_frame,
    write_json_atomic,
)
from profilers.store.runs import RunStore
from profilers.run.step_records import step_rows
from stepwise_agent.trigger import RECENT

CAPTURES = "captures"  # stepwise_agent.watch.CAPTURES: the agent's folder of captures
CAPTURE_FILE = "capture.json"
STORED_FILE = "stored.json"
ROLE = "capture"
REQUEST_FILE = "capture.request"  # stepwise_agent.watch.REQUEST_FILE


@dataclass(frozen=True)
class CaptureTrigger:
    """What made a watched run profile itself, as its agent wrote it in ``capture.json``: the rule (``kind``:
    ``step_time``, ``data_share``, ``memory``, ``on_demand``…), the step it fired at, its words and its numbers
    (the memory rule's ``grown_mb``, ``window_steps``, ``mb_per_step``, ``r2``, ``limit_mb``, ``steps_left``)."""

    kind: str
    step: int
    reason: str
    numbers: dict[str, float] = field(default_factory=dict)


def capture_trigger(run_dir: Path) -> CaptureTrigger | None:
    """The trigger of a capture run (one stored by :func:`store_capture`), else None."""
    capture = read_json(run_dir / CAPTURE_FILE)
    trigger = capture.get("trigger") if isinstance(capture, dict) else None
    if not isinstance(trigger, dict) or not trigger.get("kind"):
        return None
    raw = trigger.get("numbers")
    numbers: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return CaptureTrigger(
        kind=str(trigger["kind"]),
        step=int(trigger.get("step") or 0),
        reason=str(trigger.get("reason") or ""),
        numbers={str(k): float(v) for k, v in numbers.items() if isinstance(v, (int, float))},
    )


#: each trigger kind's rule in words (stepwise_agent.trigger's, the rank watch's, a request's)
RULES = {
    "step_time": "step-time rule",
    "data_share": "batch-drawing rule",
    "memory": "memory rule",
    "on_demand": "request (stepwise capture)",
    "rank_behind": "rank watch",
}


def trigger_words(kind: str, reason: str, numbers: dict[str, Any]) -> str:
    """What a trigger saw, in a few words ("step time +90%", "batch drawing 5% → 50%", "memory
    +300 MiB"): from its numbers, else its reason's first clause (a capture without them)."""
    n = {k: v for k, v in numbers.items() if isinstance(v, (int, float))}
    if kind == "step_time" and "rise_pct" in n:
        return f"step time +{n['rise_pct']:.0f}%"
    if kind == "data_share" and "base_share" in n and "now_share" in n:
        return f"batch drawing {n['base_share']:.0%} → {n['now_share']:.0%}"
    if kind == "memory" and "grown_mb" in n:
        return f"memory +{n['grown_mb']:.0f} MiB"
    clause = reason.split(" (")[0].split(" for ")[0].strip()
    return clause or kind.replace("_", " ")


def trigger_sentence(trigger: CaptureTrigger) -> str:
    """Which rule made the capture and what it saw, for the capture's own headline."""
    rule = RULES.get(trigger.kind, f"{trigger.kind.replace('_', ' ')} rule")
    return f"Captured by the watch's {rule} at step {trigger.step:,}: {trigger.reason}"


def capture_folders(run_dir: Path) -> list[Path]:
    """The complete captures (``capture.json`` written) of a watched run, in the order they were made."""
    root = run_dir / CAPTURES
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and (p / CAPTURE_FILE).is_file()]
    return sorted(
        found, key=lambda p: float((read_json(p / CAPTURE_FILE) or {}).get("started_unix") or 0.0)
    )


def _window_rows(run_dir: Path, capture: dict[str, Any]) -> list[dict[str, Any]]:
    """The rank's rows from the first step its trigger judged to the last profiled step."""
    first, last = (int(s) for s in capture["steps"])
    trigger = capture.get("trigger") or {}
    fired = int(trigger.get("step", first))
    raw = trigger.get("numbers")
    judged = (
        raw.get("judged_steps") if isinstance(raw, dict) else None
    )  # the rules judge RECENT steps or more (stepwise_agent.trigger)
    judged_from = min(
        first, fired - (int(judged) if isinstance(judged, (int, float)) else RECENT) + 1
    )
    rank = int(capture.get("rank") or 0)
    return [
        r
        for r in step_rows(run_dir)
        if r.get("rank", 0) == rank and judged_from <= int(r.get("step", -1)) <= last
    ]


def _window_telemetry(
    run_dir: Path, capture: dict[str, Any], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The watched run's telemetry from the first of ``rows`` to the capture's end."""
    starts = [int(r["t_unix_ns"]) for r in rows if r.get("t_unix_ns")]
    start = min([*starts, int(float(capture.get("started_unix") or 0) * 1e9)])
    end = int(float(capture.get("finished_unix") or time.time()) * 1e9)
    return [
        r
        for r in read_jsonl(run_dir / "telemetry.jsonl")
        if start <= int(r.get("t_unix_ns") or 0) <= end
    ]


def capture_groups(run_dir: Path, final: bool = True) -> list[list[Path]]:
    """The complete captures in order, those of one request for several ranks (``capture.json``'s ``job``:
    the rank watch's, :mod:`profilers.run.rank_watch`) together, the rank it names first. A group still waiting
    for a rank it asked is left out until that rank's capture is complete, or the run ended (``final``)."""
    groups: dict[str, list[tuple[dict[str, Any], Path]]] = {}
    for folder in capture_folders(run_dir):
        capture = read_json(folder / CAPTURE_FILE) or {}
        raw = capture.get("job")
        job: dict[str, Any] = raw if isinstance(raw, dict) else {}
        groups.setdefault(str(job.get("id") or folder.name), []).append((capture, folder))
    out = []
    for members in groups.values():
        first = members[0][0]
        asked = (first.get("job") or {}).get("ranks") or [first.get("rank")]
        if not final and len(members) < len(asked):
            continue
        named = ((first.get("trigger") or {}).get("numbers") or {}).get("rank")
        members.sort(key=lambda m: (m[0].get("rank") != named, m[0].get("rank") or 0))
        out.append([folder for _, folder in members])
    return out


def store_capture(store: RunStore, run_id: str, folder: Path | list[Path]) -> str | None:
    """The run a complete capture (or the ranks' captures of one request, the named rank first) became (made now
    if it is new); None for a capture without a trace."""
    folders = folder if isinstance(folder, list) else [folder]
    folder = folders[0]
    stored = read_json(folder / STORED_FILE)
    if isinstance(stored, dict) and stored.get("run_id"):
        return str(stored["run_id"])
    capture = read_json(folder / CAPTURE_FILE)
    traces = sorted(t for f in folders for t in f.glob("*.pt.trace.json.gz"))
    if not isinstance(capture, dict) or not traces:
        return None
    members = [c for c in (read_json(f / CAPTURE_FILE) for f in folders) if isinstance(c, dict)]
    if len(folders) > 1:
        capture = {**capture, "ranks": [int(c.get("rank") or 0) for c in members]}
    run_dir = store.path(run_id)
    parent = store.get(run_id)
    first, last = (int(s) for s in capture["steps"])
    files = {CAPTURE_FILE: capture}
    for name in ("launch.json", "agent.json", "injected.json"):
        value = read_json(run_dir / name)
        if isinstance(value, dict):
            files[name] = value
    record = store.create(
        "launch",
        f"{parent.label} · capture {capture.get('n')}: steps {first:,}–{last:,}, "
        + trigger_words(
            str(capture["trigger"].get("kind") or ""),
            str(capture["trigger"].get("reason") or ""),
            capture["trigger"].get("numbers") or {},
        ),
        files=files,
        parent=run_id,
        role=ROLE,
    )
    child = Path(record.run_dir)
    (child / "tb").mkdir(exist_ok=True)
    for trace in traces:
        shutil.copy2(trace, child / "tb" / trace.name)
    rows = [r for c in members for r in _window_rows(run_dir, c)]
    (child / "steps.jsonl").write_text("".join(f"{_json(r)}\n" for r in rows), encoding="utf-8")
    telemetry = _window_telemetry(run_dir, capture, rows)
    (child / "telemetry.jsonl").write_text(
        "".join(f"{_json(r)}\n" for r in telemetry), encoding="utf-8"
    )
    summary = summarise_steps(steps_frame(rows), telemetry_frame(telemetry), 0)
    store.finish(
        record.run_id,
        RunResult(
            status=RunStatus.OK,
            started_unix=capture.get("started_unix"),
            finished_unix=capture.get("finished_unix"),
            warnings=(f"captured by the watch: {capture['trigger']['reason']}",),
            **summary.result_fields(),
        ),
    )
    for f in folders:
        write_json_atomic(f / STORED_FILE, {"run_id": record.run_id})
    return record.run_id


def _json(row: dict[str, Any]) -> str:
    import json

    return json.dumps(row, default=str)


def store_captures(store: RunStore, run_id: str, final: bool = False) -> list[str]:
    """Store every complete capture of the watched run ``run_id`` not stored yet; the runs, in order
    (``final``: the run ended, a request's captures are stored with the ranks that made one)."""
    out = []
    for group in capture_groups(store.path(run_id), final):
        try:
            child = store_capture(store, run_id, group)
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
        ):  # a torn capture: tried again at the next tick
            child = None
        if child is not None:
            out.append(child)
    return out


def capture_records(run_dir: Path) -> list[dict[str, Any]]:
    """Each capture of a watched run: ``rank``, ``trigger`` (kind, step, reason), ``steps`` [first, last],
    ``status``, ``run_id`` (the run it became, None until stored), ``ranks`` (the ranks that captured: several
    for a request of the rank watch, stored as one run) — in order."""
    out = []
    for group in capture_groups(run_dir):
        folder = group[0]
        capture = read_json(folder / CAPTURE_FILE) or {}
        stored = read_json(folder / STORED_FILE)
        out.append(
            {
                "n": capture.get("n"),
                "rank": capture.get("rank"),
                "trigger": capture.get("trigger"),
                "ranks": [(read_json(f / CAPTURE_FILE) or {}).get("rank") for f in group],
                "steps": capture.get("steps"),
                "status": capture.get("status"),
                "cost_s": capture.get("cost_s"),
                "run_id": stored.get("run_id") if isinstance(stored, dict) else None,
            }
        )
    return out


def refused(run_dir: Path) -> list[dict[str, Any]]:
    """Triggers that fired while captures were refused (rate limit), from ``watch_events.jsonl``."""
    return [e for e in read_jsonl(run_dir / "watch_events.jsonl") if e.get("event") == "refused"]


def request_capture(store: RunStore, run_id: str, steps: int = 3) -> Path:
    """``stepwise capture RUN``: ask the watched job to profile its next ``steps`` steps (each rank picks the
    request up within about a second)."""
    from profilers.errors import RunError

    record = store.get(run_id)
    run_dir = store.path(run_id)
    boot = read_json(run_dir / "boot.json")
    if not isinstance(boot, dict) or not isinstance(boot.get("watch"), dict):
        raise RunError(
            f"{run_id} is not a watched run: start it with stepwise watch -- python train.py …"
        )
    if record.status.finished:
        raise RunError(
            f"{run_id} has ended ({record.status.value}): there is nothing left to capture"
        )
    write_json_atomic(run_dir / REQUEST_FILE, {"steps": int(steps), "t_unix": time.time()})
    return run_dir / REQUEST_FILE
