"""An Apply or a ladder as a stored experiment (no Streamlit): the record is created first, the work runs in a
:class:`~app.services.jobs.BackgroundJob`, every :class:`~advisors.experiments.progress.Progress` is stored
with it, and when it ends its view, its reports and its trials' roles are stored (or its error). Pages read the
store, not the job: a reload, a closed tab, another session or a restarted dashboard find the same experiment.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, TypeVar

from advisors.experiments.progress import Progress, ProgressFn
from app.services.jobs import BackgroundJob
from profilers.run.handle import cancel_run
from profilers.run.records import RunRecord, RunResult, RunStatus
from profilers.store import experiments
from profilers.store.runs import RunStore
from reports import export
from advisors.analysis import Analysis
from advisors.experiments.results.recording import applied, ladder_record
from advisors.experiments.results.stored_view import apply_view, ladder_view, roles

T = TypeVar("T")
Work = Callable[[str, ProgressFn], T]  # (experiment id, report) -> the advisor's result
REPORT_FORMATS = ("html", "md", "json")
CANCELLED_BY_YOU = "cancelled by you"


class Cancelled(Exception):
    """The user cancelled the experiment: raised before the next trial run starts (or after a stopped one)."""


def cancel(store: RunStore, experiment_id: str) -> None:
    """Ask the experiment to stop (stored first, so its thread and any session see it), then stop its trial
    runs now. The experiment's thread stores it as cancelled by you when its current trial returns."""
    store.request_cancel(experiment_id, CANCELLED_BY_YOU)
    stop_trials(store, experiment_id)


def cancel_requested(store: RunStore, experiment_id: str) -> bool:
    return store.read_cancel(experiment_id) is not None


def stop_trials(store: RunStore, experiment_id: str) -> int:
    """Cancel every still-running trial run of the experiment (idempotent; also catches a trial that started
    in the moment the cancel was asked). Returns how many were running."""
    running = [t for t in experiments.trials(store, experiment_id) if t.status is RunStatus.RUNNING]
    for t in running:
        cancel_run(store, t.run_id, f"{CANCELLED_BY_YOU} (the experiment was cancelled)")
    return len(running)


def stoppable(store: RunStore, experiment_id: str, run_one: Any) -> Any:
    """A trial runner that refuses to start a trial once the experiment is cancelled, and raises
    :class:`Cancelled` when one returns after the cancel (its run was stopped, its numbers are not a result)."""

    def run(spec: Any, on_progress: Any = None) -> Any:
        if cancel_requested(store, experiment_id):
            raise Cancelled(CANCELLED_BY_YOU)
        outcome = run_one(spec, on_progress)
        if cancel_requested(store, experiment_id):
            raise Cancelled(CANCELLED_BY_YOU)
        return outcome

    return run


def _finish_cancelled(store: RunStore, experiment_id: str) -> None:
    n = len(experiments.trials(store, experiment_id))
    why = f"{CANCELLED_BY_YOU} after {n} trial run{'' if n == 1 else 's'} started (the running one was stopped)"
    store.finish(
        experiment_id, RunResult(status=RunStatus.KILLED, error=why, finished_unix=time.time())
    )


def label_of(mode: str, about: Mapping[str, Any]) -> str:
    """What the run list calls it: "Apply DataLoader worker processes", "Ladder of 1 round" (the fix's title, as
    the Advisor names it; the dashboard walk read "Apply dataloader_workers" and "Ladder of 1 rounds")."""
    if mode == "apply":
        return f"Apply {about.get('fix_title') or about.get('fix')}"
    rounds = about.get("rounds")
    return f"Ladder of {rounds} round{'' if rounds == 1 else 's'}"


def start(
    store: RunStore,
    source: RunRecord,
    mode: experiments.Mode,
    about: Mapping[str, Any],
    analysis: Analysis,
    work: Work[Any],
) -> BackgroundJob[Any]:
    """Create the stored experiment for ``source`` and run ``work`` for it in the background."""
    what = label_of(mode, about)
    record = experiments.start(store, source.run_id, mode, f"{what} on {source.label}", about)

    def run(report: Callable[[Any], None]) -> Any:
        def relay(p: Progress) -> None:
            report(p)
            experiments.write_progress(store, record.run_id, p.to_dict())

        relay(Progress())
        try:
            result = work(record.run_id, relay)
        except Exception as err:
            if cancel_requested(store, record.run_id):
                _finish_cancelled(store, record.run_id)
                return None
            experiments.finish(store, record.run_id, None, error=f"{type(err).__name__}: {err}")
            raise
        if cancel_requested(
            store, record.run_id
        ):  # a stopped trial the advisor took as a failed one
            _finish_cancelled(store, record.run_id)
            return None
        if mode == "apply":  # every number and word of it, decided once
            shown: Any = applied(
                result, analysis.diagnosis, f"the diagnosis of {source.label}", source.run_id
            )
            view, trials = apply_view(shown.record, shown.evidence), shown.record.trials
        else:
            shown = ladder_record(result, about.get("rounds"))
            view, trials = ladder_view(shown), shown.trials
        experiments.tag_roles(store, record.run_id, roles(trials))
        key = "experiment" if mode == "apply" else "ladder"
        reports = {fmt: export.render(analysis, fmt, **{key: shown}) for fmt in REPORT_FORMATS}
        experiments.finish(store, record.run_id, view, reports=reports)
        return result

    job: BackgroundJob[Any] = BackgroundJob(f"{mode}-{record.run_id}", run)
    job.experiment_id = record.run_id
    return job


def latest(store: RunStore, source_run: str, mode: experiments.Mode) -> RunRecord | None:
    """The newest stored experiment of ``mode`` started from ``source_run`` (running or finished)."""
    found = experiments.of_run(store, source_run, mode)
    return found[0] if found else None


def last_finished(store: RunStore, source_run: str, mode: experiments.Mode) -> RunRecord | None:
    """The newest experiment of ``mode`` from ``source_run`` that finished with a result (status ok)."""
    return next(
        (r for r in experiments.of_run(store, source_run, mode) if r.status is RunStatus.OK), None
    )


def busy(store: RunStore, source_run: str) -> bool:
    """True while an experiment started from this run is still running (a second would share the machine)."""
    return any(r.status is RunStatus.RUNNING for r in experiments.of_run(store, source_run))
