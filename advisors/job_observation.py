"""A many-rank job as map and reduce: each rank file's summary (on the local cores or on Ray), reduced to the job's
breakdown and cross-rank views, then observed as any trace is (:mod:`advisors.observation`).

:func:`job_files` says when an input is such a job: a Kineto input (a folder, a TensorBoard log dir) of at least
two rank files on disk. A single file, a zip, a stored run or a memory snapshot is read as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisors.loader_facts import loader_mode
from advisors.observation import Observation
from profilers.errors import TraceError
from profilers.trace.sources import TraceFile, find_trace_files

if TYPE_CHECKING:
    from profilers.jobs.reduce import JobAnalysis

MIN_RANKS = 2


def job_files(path: str | Path) -> list[TraceFile] | None:
    """The rank files of ``path`` when it is a job of :data:`MIN_RANKS` or more rank files on disk, else None."""
    from profilers.inputs import KINETO, kind_of

    try:
        if kind_of(path) is not KINETO or not Path(path).is_dir():
            return None
        files = find_trace_files(path)
    except (TraceError, OSError):
        return None
    return files if len(files) >= MIN_RANKS and all(f.path is not None for f in files) else None


def observe_job(
    path: str | Path,
    files: list[TraceFile] | None = None,
    engine: str = "local",
    address: str | None = None,
) -> tuple[Observation, JobAnalysis]:
    """The observation of a job's traces from its ranks' summaries, and the job analysis it came from."""
    # Imported here: `analyze FILE` asks job_files() only, and the engines and the reduce are ~3 ms of imports
    # on its critical path.
    from profilers.jobs.engines import map_summaries
    from profilers.jobs.reduce import reduce_summaries

    files = files if files is not None else find_trace_files(path)
    job = reduce_summaries(map_summaries(files, engine, address))
    loader = loader_mode(job.loader_total_ns, list(job.loader_names))
    return Observation(source=str(path), breakdown=job.breakdown, run=None, loader=loader), job
