"""Run a TrainingSpec in a subprocess (``torchrun`` when ``world_size > 1``), follow it, cancel it.

``start`` returns at once with a :class:`~profilers.run.handle.RunHandle`; ``run`` blocks until the end.
Whatever happens to the process — a crash, an out-of-memory stop, a kill — the caller gets a ``RunResult``
with a status, never an exception, and the run folder keeps every step written so far. Only registered
workloads are run: the workload name is checked against ``sample_runs`` before anything starts.

A multi-node run (``nnodes > 1``) is started by a runner on every node with the same spec: each node keeps a
run folder of its own, with its ranks' steps and traces and a result written by its first rank.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from profilers.errors import SpecError
from profilers.efficiency import calibrate
from profilers.run.handle import RunHandle, spawn
from profilers.run.records import RunResult
from profilers.run.spec import TrainingSpec
from profilers.store.runs import RunStore

__all__ = ["RunHandle", "check_workload", "run", "spawn", "start", "worker_command"]

HANG_FACTOR = 2.0  # the runner's own hang backstop: this many step timeouts without a new step …
HANG_GRACE_S = 10.0  # … plus this slack (the worker enforces step_timeout_s itself; this catches a stuck one)


def check_workload(name: str, allow_external: bool = False) -> None:
    """Raise SpecError unless ``name`` is a registered workload (the runner runs nothing else).

    ``allow_external`` also admits ``"package.module:NAME"`` workloads (``sample_runs.get_workload``): an
    opt-in of Python callers such as tests, never used by the command line or the dashboard, so a spec that
    arrives from a file cannot make the runner import code.
    """
    from sample_runs import WORKLOADS, WorkloadError, get_workload  # imported here: it imports every workload

    if name in WORKLOADS:
        return
    if allow_external and ":" in name:
        try:
            get_workload(name)
        except WorkloadError as err:
            raise SpecError(str(err)) from None
        return
    known = ", ".join(sorted(WORKLOADS)) or "none registered"
    raise SpecError(f"unknown workload {name!r}; known workloads: {known}")


def worker_command(spec: TrainingSpec, run_dir: Path) -> list[str]:
    """The command line that runs ``spec`` in ``run_dir``: the worker module, under torchrun for > 1 rank.

    ``world_size`` counts the ranks of all nodes, so this node starts ``world_size // nnodes`` of them. With
    ``nnodes > 1`` every node runs this same command against the same ``rdzv_endpoint``; torchrun's c10d
    rendezvous hands out the node ranks (the agent whose host is the endpoint's hosts the rendezvous store).
    """
    worker = ["-m", "profilers.run.worker", str(run_dir)]
    world, nnodes = spec.world_size, spec.nnodes
    if world <= 1 and nnodes <= 1:
        return [sys.executable, *worker]
    if world % nnodes:
        raise SpecError(f"world_size={world} is not a multiple of nnodes={nnodes}")
    if spec.rdzv_endpoint:
        rdzv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", spec.rdzv_endpoint]
    elif nnodes == 1:
        rdzv = ["--standalone"]
    else:
        raise SpecError(f"nnodes={nnodes} needs rdzv_endpoint (host:port of the rendezvous)")
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world // nnodes),
            "--nnodes", str(nnodes), *rdzv, *worker]


def own_code_env() -> dict[str, str]:
    """``PYTHONPATH`` for the worker, which runs Stepwise's own modules: the folder holding ``profilers`` first.
    Installed, that is ``stepwise/_lib``, on no path but Stepwise's own processes' (setup.py); in a checkout, the
    repository."""
    lib = str(Path(__file__).resolve().parents[2])
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != lib]
    return {"PYTHONPATH": os.pathsep.join([lib, *rest])}


def hang_timeout_s(spec: TrainingSpec) -> float | None:
    """How long the runner waits for a new step before it stops a stuck worker (None: no step timeout)."""
    return None if spec.step_timeout_s is None else spec.step_timeout_s * HANG_FACTOR + HANG_GRACE_S


def start(spec: TrainingSpec, store: RunStore, label: str | None = None,
          extra_env: Mapping[str, str] | None = None, allow_external: bool = False,
          parent: str | None = None) -> RunHandle:
    """Store ``spec`` in a new run folder and start its worker; returns without waiting.

    Raises SpecError for an unknown workload or an impossible distributed setting (nothing is stored then).
    """
    check_workload(spec.workload, allow_external)
    record = store.create("run", label, spec, parent=parent, role="trial" if parent else None)
    if spec.device != "cuda":  # a CPU's peak is measured, once per process (profilers.efficiency.calibrate)
        calibrate.record(Path(record.run_dir))
    run_dir = Path(record.run_dir).resolve()
    env = {**own_code_env(), **(extra_env or {})}
    # Started in the run folder: `python -m` puts its working folder first on the path, where a user's own
    # `profilers.py` would shadow ours.
    return spawn(store, record.run_id, worker_command(spec, run_dir), env, hang_timeout_s=hang_timeout_s(spec),
                 cwd=str(run_dir))


def run(spec: TrainingSpec, store: RunStore, on_progress: Callable[[dict[str, Any]], None] | None = None,
        timeout_s: float | None = None, label: str | None = None,
        extra_env: Mapping[str, str] | None = None, allow_external: bool = False) -> RunResult:
    """Start ``spec`` and wait for its result; ``on_progress`` sees each new ``progress.json``.

    After ``timeout_s`` the run is cancelled and stored as ``killed``.
    """
    handle = start(spec, store, label=label, extra_env=extra_env, allow_external=allow_external)
    return follow(handle, on_progress, timeout_s)


def follow(handle: RunHandle, on_progress: Callable[[dict[str, Any]], None] | None = None,
           timeout_s: float | None = None, poll_s: float = 0.25) -> RunResult:
    """Wait for ``handle``, reporting progress changes and cancelling after ``timeout_s``."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last: dict[str, Any] | None = None

    def report() -> None:
        nonlocal last
        progress = handle.progress() if on_progress is not None else None
        if on_progress is not None and progress is not None and progress != last:
            last = progress
            on_progress(progress)

    while not handle.poll().finished:
        report()
        if deadline is not None and time.monotonic() > deadline:
            handle.cancel(f"timed out after {timeout_s:g} s")
        handle.join(poll_s)
    report()  # the last word, even when the run ended between two polls
    return handle.wait()
