"""``analyze``'s ``job`` for a folder of ranks, for every command that shows one (``analyze``, ``analyze --report``,
``compare --report``): its own module so that :mod:`cli.advisors` and :mod:`cli.compare` both import it, and
neither the other (``cli.advisors`` runs ``compare``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisors.observation import Observation
    from profilers.jobs.reduce import JobAnalysis
    from profilers.trace.sources import TraceFile
    from reports.analysis import Analysis


def job_json(job: JobAnalysis, engine: str | None) -> dict[str, Any]:
    """The ``job`` of ``analyze --json`` from a folder's map and reduce: its cross-rank views and how it was read."""
    return {**job.views, "engine": engine or "local", "summaries": job.summaries, "summaries_cached": job.cached}


def with_job_views(analysis: Analysis, path: str, files: list[TraceFile] | None = None,
                   observed: tuple[Observation, JobAnalysis] | None = None, engine: str | None = None,
                   address: str | None = None) -> Analysis:
    """``analysis`` (a :class:`reports.analysis.Analysis`) with the ``job`` that ``analyze --json`` gives
    ``path`` when it is a folder of ranks (its map and reduce, ``observed`` if already done), so a report's Ranks
    section and ``compare``'s ``ranks`` say what the JSON says. A run's own (its agent summaries) is already
    there."""
    from advisors.job_observation import job_files, observe_job

    files = files if files is not None else job_files(path)
    if files is None:
        return analysis
    observed = observed or observe_job(path, files, engine or "local", address)
    return replace(analysis, job=job_json(observed[1], engine))
