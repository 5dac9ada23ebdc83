"""Experiments as stored objects: an Apply (one A/B experiment) or a ladder is one entry of the run store.

An experiment is a run folder of kind ``experiment`` whose manifest names the run it was started from
(``source_run``); its trial runs are ordinary runs whose manifest names it (``parent``) and their part
(``role``: ``trial`` while it runs, then ``baseline``/``patched``/``reference``). Lists leave trials out by
default (``RunStore.list(trials=False)``), so one Apply is one entry however many runs it took. In its folder:

    experiment.json   what was asked: mode (``apply``/``ladder``), fix, trials per arm, rounds
    progress.json     the latest :class:`~advisors.experiments.progress.Progress` (any session can follow it)
    view.json         the finished result as every page shows it (numbers, samples, curves, verdict)
    report.html|md|json   the run's report with this result in it, rendered when it finished
    result.json       status (``ok`` finished, ``failed`` with its error, ``killed`` when its host died)

The experiment's pid is the process that runs it (the dashboard), so ``RunStore.recover`` settles an experiment
whose dashboard was restarted mid-way as ``killed``; its finished trials stay.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

import psutil

from profilers.run.records import RunRecord, RunResult, RunStatus
from profilers.store.files import read_json, safe_name, write_json_atomic
from profilers.store.runs import RunStore

Mode = Literal["apply", "ladder"]
ABOUT_FILE = "experiment.json"
PROGRESS_FILE = "progress.json"
VIEW_FILE = "view.json"
REPORT_FORMATS = ("html", "md", "json")


def start(
    store: RunStore, source_run: str | None, mode: Mode, label: str, about: Mapping[str, Any]
) -> RunRecord:
    """A new experiment record (status ``running``) for ``source_run`` (``None``: started from a spec or a
    script on the command line), owned by this process."""
    record = store.create(
        "experiment", label, files={ABOUT_FILE: {"mode": mode, **about}}, source_run=source_run
    )
    try:
        started: float | None = psutil.Process(os.getpid()).create_time()
    except psutil.Error:
        started = None
    return store.update(record.run_id, pid=os.getpid(), pid_started=started)


def write_progress(store: RunStore, experiment_id: str, progress: Mapping[str, Any]) -> None:
    write_json_atomic(
        store.path(experiment_id) / PROGRESS_FILE, {**progress, "t_unix": time.time()}
    )


def tag_roles(
    store: RunStore, experiment_id: str, arms: Mapping[str, Iterable[str | None]]
) -> None:
    """Name each trial's part once it is known: ``{"baseline": [run id or folder, …], "patched": […]}``. Only
    this experiment's own trial runs are touched (a run folder it merely read stays as it is)."""
    mine = {r.run_id for r in trials(store, experiment_id)}
    for role, run_dirs in arms.items():
        for run_dir in run_dirs:
            if run_dir and Path(run_dir).name in mine:
                store.update(Path(run_dir).name, role=role)


def finish(
    store: RunStore,
    experiment_id: str,
    view: Mapping[str, Any] | None,
    error: str | None = None,
    reports: Mapping[str, bytes] | None = None,
) -> RunRecord:
    """Store the outcome: the page's ``view`` and the rendered ``reports`` (format → bytes), or the error."""
    folder = store.path(experiment_id)
    if view is not None:
        write_json_atomic(folder / VIEW_FILE, dict(view))
    for fmt, body in (reports or {}).items():
        if fmt in REPORT_FORMATS:
            tmp = folder / f".report.{fmt}.tmp"
            tmp.write_bytes(body)
            os.replace(tmp, folder / safe_name(f"report.{fmt}"))
    status = RunStatus.FAILED if error else RunStatus.OK
    return store.finish(
        experiment_id, RunResult(status=status, error=error, finished_unix=time.time())
    )


def about(store: RunStore, experiment_id: str) -> dict[str, Any]:
    data = read_json(store.path(experiment_id) / ABOUT_FILE)
    return data if isinstance(data, dict) else {}


def progress(store: RunStore, experiment_id: str) -> dict[str, Any] | None:
    data = read_json(store.path(experiment_id) / PROGRESS_FILE)
    return data if isinstance(data, dict) else None


def view(store: RunStore, experiment_id: str) -> dict[str, Any] | None:
    data = read_json(store.path(experiment_id) / VIEW_FILE)
    return data if isinstance(data, dict) else None


def report(store: RunStore, experiment_id: str, fmt: str) -> bytes | None:
    """The stored report in ``fmt``, or None when it was not written."""
    if fmt not in REPORT_FORMATS:
        return None
    try:
        return (store.path(experiment_id) / f"report.{fmt}").read_bytes()
    except OSError:
        return None


def of_run(store: RunStore, source_run: str, mode: Mode | None = None) -> list[RunRecord]:
    """The experiments started from ``source_run``, newest first (of one ``mode`` when given)."""
    found = store.list(kind="experiment", source_run=source_run, limit=None)
    return [r for r in found if mode is None or about(store, r.run_id).get("mode") == mode]


def trials(store: RunStore, experiment_id: str) -> list[RunRecord]:
    """An experiment's trial runs, newest first."""
    return store.list(parent=experiment_id, limit=None)
