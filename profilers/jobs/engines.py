"""Where the map of a many-rank analysis runs: this machine's cores (``local``, the default) or a Ray cluster
(``ray``, the engine ML teams already run beside their GPUs; ``pip install "stepwise[cluster]"``).

Each task reads one rank file where it lies and returns its summary (:func:`profilers.jobs.rank_summary.
summarise_path`), a few hundred kB: the parent never holds a rank's events, and at most one rank's events are in
a worker at a time. With Ray each file must be readable at the same path from the node that runs its task (a
shared filesystem, as a job's trace folder on a cluster is); the cluster's nodes need Stepwise installed, or the
local cluster started here gets this checkout on its workers' ``PYTHONPATH``.

Every task also reports its worker's pid and peak RSS, so a benchmark can show the memory of every process.
"""

from __future__ import annotations

import logging
import os
import resource
from typing import Any, Sequence

from profilers.errors import StepwiseError
from profilers.trace.sources import TraceFile

ENGINES = ("local", "ray")
WORKERS_ENV = "STEPWISE_MAP_WORKERS"


def _task(path: str, order: int, use_cache: bool) -> dict[str, Any]:
    """One rank file's summary, plus the worker's pid and its peak RSS so far (kB)."""
    from profilers.jobs.rank_summary import summarise_path

    out = summarise_path(path, order, use_cache)
    out["worker"] = {
        "pid": os.getpid(),
        "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        # the parse processes this worker forked for a large file, waited for (the largest one's peak)
        "children_max_rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    }
    return out


def local_workers(n_files: int) -> int:
    env = os.environ.get(WORKERS_ENV)
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    wanted = int(env) if env and env.isdigit() else cores
    return max(1, min(wanted, n_files))


def map_summaries(
    files: Sequence[TraceFile],
    engine: str = "local",
    address: str | None = None,
    use_cache: bool = True,
) -> list[dict[str, Any]]:
    """Every rank file's summary, in file order, on ``engine``. Files that are not on disk (zip members) are
    summarised in this process."""
    if engine not in ENGINES:
        raise StepwiseError(f"unknown engine {engine!r}: one of {', '.join(ENGINES)}")
    on_disk = [(i, f) for i, f in enumerate(files) if f.path is not None]
    out: dict[int, dict[str, Any]] = {}
    if on_disk:
        run = _map_ray if engine == "ray" else _map_local
        for (i, _), summary in zip(
            on_disk, run([(str(f.path), i) for i, f in on_disk], address, use_cache)
        ):
            out[i] = summary
    for i, f in enumerate(files):
        if i not in out:
            from profilers.jobs.rank_summary import summarise_file

            out[i] = summarise_file(f, i)
    return [out[i] for i in range(len(files))]


def _map_local(
    tasks: list[tuple[str, int]], address: str | None, use_cache: bool
) -> list[dict[str, Any]]:
    import threading

    workers = local_workers(len(tasks))
    if (
        workers < 2 or threading.active_count() > 1
    ):  # forking a threaded process (the dashboard) can deadlock
        return [_task(p, i, use_cache) for p, i in tasks]
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from profilers.jobs import collectives, rank_summary  # noqa: F401  (imported once, before the fork: shared)
    from profilers.trace import breakdown, load  # noqa: F401

    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
        futures = [pool.submit(_task, p, i, use_cache) for p, i in tasks]
        return [f.result() for f in futures]


def _map_ray(
    tasks: list[tuple[str, int]], address: str | None, use_cache: bool
) -> list[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise StepwiseError('the ray engine needs Ray: pip install "stepwise[cluster]"') from None
    if not ray.is_initialized():
        from pathlib import Path

        import profilers

        lib = str(
            Path(profilers.__file__).resolve().parent.parent
        )  # the folder holding Stepwise's packages
        env = {"PYTHONPATH": os.pathsep.join(p for p in (lib, os.environ.get("PYTHONPATH")) if p)}
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                runtime_env={"env_vars": env},
                logging_level=logging.ERROR,
                log_to_driver=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise StepwiseError(
                f"could not reach a Ray cluster at {address or 'a new local one'}: {err}"
            ) from None
    remote = ray.remote(num_cpus=1, max_retries=1)(_task)
    return list(ray.get([remote.remote(p, i, use_cache) for p, i in tasks]))
