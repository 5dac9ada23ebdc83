"""Cached reads for the pages: the run store and analyses of runs and traces.

Every analysis is :func:`advisors.analysis.analyse`'s (the one the command line computes); a run folder's or an
upload's is the one stored in its folder (:mod:`advisors.analysis.stored`), computed there once. ``st.cache_data``
wraps only pure functions of their arguments, bounded by ``max_entries`` and ``ttl``. An analysis is keyed by
:mod:`profilers.store.fingerprint`: a stored run by the stat of its files (it changes while it trains), a trace
being uploaded by the digest of its content (so the analysis made while validating the upload is the one stored
in the upload's folder: the file is parsed once). Cached values are small (an
:class:`~advisors.analysis.Analysis` holds no raw events), so a cache hit — which unpickles a copy — stays fast.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from typing import Any

from advisors.analysis import SUMMARY_RANKS, Analysis, analyse
from advisors.analysis.stored import ANALYSIS_FILE, stored_headline, stored_or_computed
from advisors.experiments.results.stored_view import read_view
from advisors.job_observation import job_files
from profilers.errors import StepwiseError
from profilers.inputs import upload_root
from profilers.run.records import RunRecord
from profilers.store import experiments
from profilers.store.fingerprint import content_digest, stat_fingerprint
from profilers.store.runs import RunStore
from profilers.trace.events import Trace
from profilers.trace.load import load_trace
from profilers.trace.memory_snapshot import is_snapshot_file, read_snapshot_document
from profilers.trace.snapshot_history import SnapshotHistory, snapshot_history
from reports.events.window import EventIndex, event_index

ANALYSIS_ENTRIES = 12
ANALYSIS_TTL_S = 3600
TRACE_ENTRIES = (
    2  # loaded traces kept for the Events page (a 100 MB trace holds a few hundred MB in memory)
)


def store() -> RunStore:
    """The run store (``$STEPWISE_HOME``, else ``./runs``); cheap to open, safe across sessions."""
    return RunStore()


def listed_runs() -> list[RunRecord]:
    """What the run list shows: runs, uploads and experiments (one entry each), not the trial runs inside."""
    return store().list(trials=False)


def experiment_outcomes(records: list[RunRecord]) -> dict[str, str]:
    """Each finished experiment's label from its stored record (:attr:`ExperimentRecord.label`: the outcome word
    and speed-up the Advisor card shows, "inconclusive 0.98×", "not applied"; a ladder's "ladder 1.80×")."""
    out: dict[str, str] = {}
    for r in records:
        if r.kind != "experiment" or not r.status.finished:
            continue
        seen = read_view(experiments.view(store(), r.run_id))
        if seen is not None:
            out[r.run_id] = seen.label
    return out


def analysable_runs(linked: tuple[str | None, ...] = ()) -> list[RunRecord]:
    """What the run pickers offer: runs and uploads (an experiment is reached from the run it started from), and
    the trial runs a link names (``?b=<trial run id>``: Analysis opens one, so Compare does too)."""
    listed = [r for r in listed_runs() if r.kind != "experiment"]
    known = {r.run_id for r in listed}
    for run_id in dict.fromkeys(i for i in linked if i and i not in known):
        try:
            record = store().get(run_id)
        except (StepwiseError, OSError, ValueError):
            continue  # no such run: the page says so
        if record.parent and record.kind != "experiment":
            listed.append(record)
    return listed


@st.cache_data(max_entries=256, ttl=ANALYSIS_TTL_S, show_spinner=False)
def _digest(path: str, fingerprint: tuple) -> str:
    return content_digest(path)


@st.cache_data(
    max_entries=ANALYSIS_ENTRIES,
    ttl=ANALYSIS_TTL_S,
    show_spinner="Reading and analysing the trace…",
)
def _trace_analysis(digest: str, label: str, _path: str) -> Analysis:
    path = Path(_path)
    files = job_files(path)
    if is_snapshot_file(path) or (files is not None and len(files) >= SUMMARY_RANKS):
        return analyse(path, label)  # many ranks: their summaries, never all their events
    # Parsed once: the loaded trace (and its window index) stays for the Events page, keyed by the content.
    return analyse(path, label, trace=_loaded_trace(digest, _path))


@st.cache_data(max_entries=ANALYSIS_ENTRIES, ttl=ANALYSIS_TTL_S, show_spinner="Reading the run…")
def _run_analysis(path: str, label: str, fingerprint: tuple) -> Analysis:
    return analyse(Path(path), label)


@st.cache_data(max_entries=ANALYSIS_ENTRIES, ttl=ANALYSIS_TTL_S, show_spinner="Reading the upload…")
def _upload_analysis(path: str, label: str, digest: str | None, fingerprint: tuple) -> Analysis:
    # The analysis stored in the upload's folder; the first time, the one made while validating the upload (the
    # content-keyed cache above), stored there: the trace is parsed once.
    run_dir = Path(path)
    return stored_or_computed(
        run_dir, lambda: trace_analysis(upload_root(run_dir / "trace"), label, digest)
    )


@st.cache_data(max_entries=1024, ttl=ANALYSIS_TTL_S, show_spinner=False)
def _headline(path: str, fingerprint: tuple) -> dict[str, Any] | None:
    return stored_headline(Path(path))


def stored_headlines(records: list[RunRecord]) -> dict[str, dict[str, Any]]:
    """The Runs list's figures (step time, samples/s, bottleneck) of each run whose analysis is stored and
    current, by run id: the very value its Analysis page and reports show."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.kind == "experiment":
            continue
        head = _headline(r.run_dir, _fingerprint(Path(r.run_dir)))
        if head is not None:
            out[r.run_id] = head
    return out


def _fingerprint(run_dir: Path) -> tuple:
    """A run folder's cache key: the stat of its files, its stored analysis included (written, it is read)."""
    return stat_fingerprint(run_dir)


def trace_digest(path: Path) -> str:
    """Content digest of a trace file or folder (cached per stat fingerprint, so hashed once per file)."""
    return _digest(str(path), stat_fingerprint(path))


def trace_analysis(path: Path, label: str, digest: str | None = None) -> Analysis:
    """Analysis of a trace file or folder, keyed by its content. Raises TraceError for a bad trace."""
    return _trace_analysis(digest or trace_digest(path), label, str(path))


def checked_upload(path: Path, label: str) -> tuple[Analysis, str]:
    """Validate a staged upload by analysing it; returns the analysis and the content digest (its cache key)."""
    digest = trace_digest(path)
    return trace_analysis(path, label, digest), digest


def upload_trace_root(record: RunRecord) -> Path:
    """What an ``upload`` run holds under ``trace/``: the one file or folder that was uploaded."""
    return upload_root(Path(record.run_dir) / "trace")


def run_analysis(record: RunRecord, digest: str | None = None) -> Analysis:
    """Analysis of a stored run or upload. Raises TraceError when an upload's trace cannot be read.

    ``digest``: an upload's content digest when the caller knows it (it uploaded the file), else computed."""
    run_dir = Path(record.run_dir)
    if record.kind == "upload":
        return _upload_analysis(str(run_dir), record.label, digest, _fingerprint(run_dir))
    return _run_analysis(str(run_dir), record.label, _fingerprint(run_dir))


@st.cache_resource(max_entries=TRACE_ENTRIES, ttl=ANALYSIS_TTL_S, show_spinner=False)
def _loaded_trace(key: str, _path: str) -> Trace:
    # A resource, not data: the loaded trace is shared read-only, never pickled per session. ``key``: an
    # upload's content digest (its file moves from staging into the store), else the path and its stat.
    return load_trace(_path)


@st.cache_resource(max_entries=TRACE_ENTRIES, ttl=ANALYSIS_TTL_S, show_spinner=False)
def _window_index(key: str, _path: str) -> EventIndex:
    # Built on the first visit of the Events page only, so an upload's first view does not pay for it.
    return event_index(_loaded_trace(key, _path))


@st.cache_data(max_entries=ANALYSIS_ENTRIES, ttl=ANALYSIS_TTL_S, show_spinner=False)
def _snapshot_history(path: str, fingerprint: tuple) -> SnapshotHistory:
    return snapshot_history(read_snapshot_document(path))


def trace_source(record: RunRecord) -> Path:
    """The file or folder holding a run's trace (an upload's file, else the run folder)."""
    return upload_trace_root(record) if record.kind == "upload" else Path(record.run_dir)


def is_snapshot(record: RunRecord) -> bool:
    return is_snapshot_file(trace_source(record))


def many_ranks(record: RunRecord) -> Path | None:
    """The folder of an upload of :data:`~advisors.analysis.SUMMARY_RANKS` or more rank files (read as
    summaries: its events are opened one rank at a time, on the Job page), else None."""
    if record.kind != "upload":
        return None
    path = trace_source(record)
    files = job_files(path)
    return path if files is not None and len(files) >= SUMMARY_RANKS else None


def event_trace(record: RunRecord, digest: str | None = None) -> tuple[Trace, EventIndex]:
    """The run's loaded trace and its window index (cached; an upload's trace is the one its analysis loaded).
    ``digest``: an upload's content digest when the caller knows it. Raises TraceError."""
    path = trace_source(record)
    key = (
        (digest or trace_digest(path))
        if record.kind == "upload"
        else f"{path}|{stat_fingerprint(path, exclude=(ANALYSIS_FILE,))}"
    )  # its stored analysis is no part of its trace
    return _loaded_trace(key, str(path)), _window_index(key, str(path))


def snapshot_over_time(record: RunRecord) -> SnapshotHistory:
    """A memory snapshot's curve over time and top stacks (cached per file stat). Raises TraceError."""
    path = trace_source(record)
    return _snapshot_history(str(path), stat_fingerprint(path))
