"""The one place that knows the session-state keys. Everything here is per browser session, never shared.

Pages call these accessors instead of touching ``st.session_state`` with string keys, so a key is spelled once.
Long-lived objects (a run's :class:`~profilers.run.handle.RunHandle`, an experiment job) live here too: they
belong to the session that started them; the run store on disk is what every session shares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import streamlit as st

if TYPE_CHECKING:  # types only: the state module stays light to import
    from advisors.experiments.experiment import Experiment
    from advisors.experiments.optimize import Ladder
    from advisors.experiments.trials import Spec
    from app.services.jobs import BackgroundJob

SELECTED_RUN = "stepwise.selected_run"
COMPARE_PAIR = "stepwise.compare_pair"
LAUNCH_HANDLE = "stepwise.launch_handle"
UPLOAD_SEEN = "stepwise.upload_seen"
UPLOAD_RESULTS = "stepwise.upload_results"
EXPERIMENT_JOB = "stepwise.experiment_job"
LADDER_JOB = "stepwise.ladder_job"
LIVE_RUNNING = "stepwise.live_running"
FOLLOWED_RUN = "stepwise.followed_run"
ANALYSIS_TAB = (
    "stepwise.analysis_tab"  # the open tab of the Analysis page (a widget key: Streamlit sets it)
)
UPLOAD_DIGESTS = "stepwise.upload_digests"
DEVICE_MEMORY = (
    "stepwise.device_memory"  # run id -> the device total (bytes) a user stated for a snapshot
)
FOLLOWED_LINK = (
    "stepwise.followed_link"  # the last ``?run=`` this session followed (a link is followed once)
)
EVENTS_START, EVENTS_END = (
    "stepwise.events.start_ms",
    "stepwise.events.end_ms",
)  # the Events page's window inputs
EVENTS_RUN = "stepwise.events.run"  # the run whose window those inputs hold


def _get(key: str, default: Any = None) -> Any:
    return st.session_state.get(key, default)


def _set(key: str, value: Any) -> None:
    st.session_state[key] = value


def selected_run() -> str | None:
    """The run (id) the Analysis, Advisor and Report pages show."""
    return _get(SELECTED_RUN)


def select_run(run_id: str | None) -> None:
    _set(SELECTED_RUN, run_id)


def followed_link() -> str | None:
    return _get(FOLLOWED_LINK)


def set_followed_link(run_id: str | None) -> None:
    _set(FOLLOWED_LINK, run_id)


def compare_pair() -> tuple[str | None, str | None]:
    return _get(COMPARE_PAIR, (None, None))


def set_compare_pair(a: str | None, b: str | None) -> None:
    _set(COMPARE_PAIR, (a, b))


def launch_handle() -> Any | None:
    """The RunHandle of the run this session started last (its live view and Cancel need it)."""
    return _get(LAUNCH_HANDLE)


def set_launch_handle(handle: Any | None) -> None:
    _set(LAUNCH_HANDLE, handle)


def upload_seen() -> set[str]:
    """Ids of uploaded files already processed (the uploader returns them again on every rerun)."""
    seen = _get(UPLOAD_SEEN)
    if seen is None:
        seen = set()
        _set(UPLOAD_SEEN, seen)
    return seen


def upload_results() -> list[Any]:
    """Outcomes of this session's uploads, newest first (shown on the Upload page)."""
    results = _get(UPLOAD_RESULTS)
    if results is None:
        results = []
        _set(UPLOAD_RESULTS, results)
    return results


def experiment_job() -> BackgroundJob[Experiment[Spec]] | None:
    return _get(EXPERIMENT_JOB)


def set_experiment_job(job: BackgroundJob[Experiment[Spec]] | None) -> None:
    _set(EXPERIMENT_JOB, job)


def ladder_job() -> BackgroundJob[Ladder[Spec]] | None:
    return _get(LADDER_JOB)


def set_ladder_job(job: BackgroundJob[Ladder[Spec]] | None) -> None:
    _set(LADDER_JOB, job)


def live_was_running() -> bool:
    """Whether the live view last saw its run running (so it reruns the page once when the run ends)."""
    return bool(_get(LIVE_RUNNING, False))


def set_live_was_running(running: bool) -> None:
    _set(LIVE_RUNNING, running)


def followed_run() -> str | None:
    """The run the Launch page follows live (the one this session started, or one it chose to follow)."""
    return _get(FOLLOWED_RUN)


def follow_run(run_id: str | None) -> None:
    _set(FOLLOWED_RUN, run_id)


def upload_digest(run_id: str) -> str | None:
    """The content digest of a trace this session uploaded (saves hashing the stored copy again)."""
    return _get(UPLOAD_DIGESTS, {}).get(run_id)


def remember_upload_digest(run_id: str, digest: str) -> None:
    digests = dict(_get(UPLOAD_DIGESTS, {}))
    digests[run_id] = digest
    _set(UPLOAD_DIGESTS, digests)


def device_memory(run_id: str) -> int | None:
    """The device total this session stated for a memory snapshot run (snapshots do not record one)."""
    return _get(DEVICE_MEMORY, {}).get(run_id)


def set_device_memory(run_id: str, total_bytes: int | None) -> None:
    totals = dict(_get(DEVICE_MEMORY, {}))
    totals[run_id] = total_bytes
    _set(DEVICE_MEMORY, totals)


def event_window(run_id: str, span_ms: float) -> tuple[float, float]:
    """The Events page's window (ms) for ``run_id``; the whole trace when the run changed or none was set."""
    if _get(EVENTS_RUN) != run_id or _get(EVENTS_START) is None or _get(EVENTS_END) is None:
        set_event_window(0.0, span_ms)
        _set(EVENTS_RUN, run_id)
    return float(_get(EVENTS_START)), float(_get(EVENTS_END))


def set_event_window(start_ms: float, end_ms: float) -> None:
    """Set the window (the number inputs' own keys: call it before they are drawn, e.g. from a callback)."""
    _set(EVENTS_START, round(float(start_ms), 3))
    _set(EVENTS_END, round(float(end_ms), 3))
