"""An Apply or a ladder as a stored experiment (no Streamlit): the record is created first, the work runs in a
:class:`~app.services.jobs.BackgroundJob`, every :class:`~advisors.experiments.progress.Progress` is stored
with it, and when it ends its view, its reports and its trials' roles are stored (or its error). Pages read the
store, not the job: a reload, a closed tab, another session or a restarted dashboard find the same experiment.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from advisors.experiments.progress import Progress, ProgressFn
from app.services.jobs import BackgroundJob
from profilers.run.records import RunRecord, RunStatus
from profilers.store import experiments
from profilers.store.runs import RunStore
from reports import export
from reports.analysis import Analysis
from reports.experiment_view import experiment_roles, experiment_view, ladder_roles, ladder_view

T = TypeVar("T")
Work = Callable[[str, ProgressFn], T]  # (experiment id, report) -> the advisor's result
REPORT_FORMATS = ("html", "md", "json")


def start(store: RunStore, source: RunRecord, mode: experiments.Mode, about: Mapping[str, Any],
          analysis: Analysis, work: Work[Any]) -> BackgroundJob[Any]:
    """Create the stored experiment for ``source`` and run ``work`` for it in the background."""
    what = f"Apply {about.get('fix')}" if mode == "apply" else f"Ladder of {about.get('rounds')} rounds"
    record = experiments.start(store, source.run_id, mode, f"{what} on {source.label}", about)

    def run(report: Callable[[Any], None]) -> Any:
        def relay(p: Progress) -> None:
            report(p)
            experiments.write_progress(store, record.run_id, p.to_dict())

        relay(Progress())
        try:
            result = work(record.run_id, relay)
        except Exception as err:
            experiments.finish(store, record.run_id, None, error=f"{type(err).__name__}: {err}")
            raise
        view, roles = (experiment_view(result, analysis.diagnosis), experiment_roles(result)) if mode == "apply" else \
            (ladder_view(result), ladder_roles(result))
        experiments.tag_roles(store, record.run_id, roles)
        key = "experiment" if mode == "apply" else "ladder"
        reports = {fmt: export.render(analysis, fmt, **{key: result}) for fmt in REPORT_FORMATS}
        experiments.finish(store, record.run_id, view, reports=reports)
        return result

    job: BackgroundJob[Any] = BackgroundJob(f"{mode}-{record.run_id}", run)
    job.experiment_id = record.run_id
    return job


def latest(store: RunStore, source_run: str, mode: experiments.Mode) -> RunRecord | None:
    """The newest stored experiment of ``mode`` started from ``source_run`` (running or finished)."""
    found = experiments.of_run(store, source_run, mode)
    return found[0] if found else None


def busy(store: RunStore, source_run: str) -> bool:
    """True while an experiment started from this run is still running (a second would share the machine)."""
    return any(r.status is RunStatus.RUNNING for r in experiments.of_run(store, source_run))
