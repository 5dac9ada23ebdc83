"""Run one training spec, instrumented, into a run folder: ``python -m profilers.run.worker RUN_DIR``.

Started directly (one process) or under ``torchrun`` (RANK/WORLD_SIZE/LOCAL_RANK from the environment). The
runner writes ``RUN_DIR/spec.json`` first; this worker writes (see ``profilers/run/trainer_record.py``):

- ``steps.jsonl``: one line per rank per optimizer step, flushed every step: ``rank, step, wall_ms, loss,
  samples`` (this rank's samples, = batch_size), ``profiled`` (the profiler was collecting), ``t_unix_ns``,
  ``data_ms`` (drawing the step's batches and moving them to the device: the data fixes' bound);
- ``telemetry.jsonl``: NVML or host samples at 10 Hz (local rank 0; ``STEPWISE_TELEMETRY_INTERVAL_S``);
- ``progress.json``: the leader, replaced atomically at start and after every step, and with the final status;
- ``tb/``: ``rank{R}.<ns>.pt.trace.json.gz`` traces and the leader's TensorBoard scalars (``profilers.run.tb_export``
  names them), on disk before the process ends, failed or not;
- ``result.json``: the leader at the end, or the first rank that fails. Beyond the contract's keys it carries
  ``total_steps, backend, rank, node_rank, instrumented, setup_s, peak_rss_with_profiler_mb`` and, when ok,
  ``rank_step_time_ms`` (median per rank, every node's) and ``slowest_rank``; a failure names ``failed_rank``.

The leader is local rank 0: rank 0 on one machine. In a multi-node run every node has a run folder of its own
(the runner started there), which its local ranks fill, so each node's leader writes that folder's progress and
result — a node without rank 0 would otherwise end without a result and be stored as failed.

``step_time_ms`` is the median of the steady steps (:mod:`stepwise_agent.steady`: after ``warmup_steps``, not
profiled, not next to the profiler's window), ``step_time_steps`` how many and ``step_time_basis`` how they were
chosen; ``profiled_step_time_ms`` is the profiled window's own median, shown beside it and never in its place;
``samples_per_s`` = the samples of those steps over their time (:func:`stepwise_agent.steady.samples_per_s`).
``peak_memory_mb`` on CPU is the watchdog's peak RSS of the process tree outside the profiling window.

Exit codes: 0 ok, 1 failed (exception, step timeout), ``EXIT_OUT_OF_MEMORY`` (75) when the memory budget is
passed or torch/Python run out of memory. ``STEPWISE_BARE=1`` runs without profiler, telemetry or TensorBoard.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from stepwise_agent import steady

from profilers.run import instrument

from profilers.run import trainer_dist
from profilers.errors import StepwiseError
from profilers.run.spec import TrainingSpec
from profilers.telemetry.process import TelemetryProcess
from profilers.run.trainer import StepRecord, Trainer
from profilers.run.trainer_record import (PROGRESS_FILE, RESULT_FILE, RunRecorder, median_iqr, write_json_atomic,
                                      write_json_if_absent)

EXIT_OK, EXIT_FAILED, EXIT_OUT_OF_MEMORY = 0, 1, 75
TELEMETRY_INTERVAL_ENV = "STEPWISE_TELEMETRY_INTERVAL_S"


class RunState:
    """What the result needs, filled in as the run progresses (the watchdog may end the run at any point)."""

    def __init__(self, run_dir: Path, info: trainer_dist.DistInfo) -> None:
        self.run_dir, self.info = run_dir, info
        self.started = time.time()
        self.spec: TrainingSpec | None = None
        self.trainer: Trainer | None = None
        self.recorder: RunRecorder | None = None
        self.telemetry: TelemetryProcess | None = None
        self.watchdog: instrument.Watchdog | None = None
        self.bare = instrument.bare_requested()
        self.setup_s: float | None = None
        self._lock = threading.Lock()  # the watchdog thread and the main thread may both end the run

    def peak_memory_mb(self) -> float:
        """CUDA: max allocated. CPU: the watchdog's peak RSS of the process tree outside the profiler's window
        (what the budget is checked against), or the process high-water mark when no watchdog ran."""
        device_peak = self.trainer.peak_device_memory_mb() if self.trainer else None
        if device_peak is not None:
            return round(device_peak, 1)
        if self.watchdog is not None and self.watchdog.peak_mb > 0:
            return round(self.watchdog.peak_mb, 1)
        return round(instrument.own_peak_rss_mb(), 1)

    def result(self, status: str, error: str | None, **extra: Any) -> dict[str, Any]:
        spec, rec, tr = self.spec, self.recorder, self.trainer
        choice = rec.step_choice(spec.warmup_steps) if rec and spec else None
        times = rec.step_times(spec.warmup_steps) if rec and spec else []
        median, iqr = median_iqr(times)
        profiled_median = median_iqr(rec.profiled_times())[0] if rec else None
        world = self.info.world_size
        samples_per_s = steady.samples_per_s([spec.batch_size * world] * len(times), times) if spec else None
        tel = self.telemetry
        return {
            "status": status, "error": error,
            "steps_done": tr.steps_done if tr else 0, "total_steps": tr.total_steps if tr else None,
            "step_time_ms": median, "step_time_iqr_ms": iqr, "samples_per_s": samples_per_s,
            "step_time_steps": len(times), "step_time_basis": choice.basis if choice else None,
            "profiled_step_time_ms": profiled_median,
            "peak_memory_mb": self.peak_memory_mb(), "peak_rss_with_profiler_mb": round(instrument.own_peak_rss_mb(), 1),
            "final_loss": tr.final_loss if tr else None,
            "device": tr.device.type if tr else None, "device_name": tr.device_name if tr else None,
            "world_size": world, "backend": tr.backend if tr else None, "rank": self.info.rank,
            "node_rank": self.info.node_rank,
            "telemetry_source": tel.source if tel else None,
            "telemetry_note": tel.note if tel else ("instrumentation off (STEPWISE_BARE=1)" if self.bare
                                                    else "telemetry runs on local rank 0 only"),
            "instrumented": not self.bare, "warnings": list(tr.warnings) if tr else [],
            "setup_s": None if self.setup_s is None else round(self.setup_s, 3),
            "started_unix": self.started, "finished_unix": time.time(), **extra,
        }

    def finish_abnormally(self, status: str, error: str, code: int) -> None:
        """Write the failure result (first writer wins across ranks) and end the process now."""
        with self._lock:
            result = self.result(status, error, failed_rank=self.info.rank)
            if write_json_if_absent(self.run_dir / RESULT_FILE, result) and self.info.local_rank == 0:
                write_json_atomic(self.run_dir / PROGRESS_FILE, _final_progress(result))
            if self.telemetry is not None:
                self.telemetry.stop(wait=False)  # no wait: the steps must not run on past the result just written
            if self.recorder is not None:
                # os._exit skips the finally of main: without this close, the TensorBoard scalars still in
                # the writer's queue (it flushes every 2 minutes) are lost with the process.
                with contextlib.suppress(Exception):
                    self.recorder.close()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # the main thread may be stuck inside a step: do not wait for it


def _final_progress(result: dict[str, Any]) -> dict[str, Any]:
    return {"step": result["steps_done"], "total_steps": result["total_steps"], "loss": result["final_loss"],
            "eta_s": 0.0, "elapsed_s": round(result["finished_unix"] - result["started_unix"], 3),
            "status": result["status"], "updated_unix": time.time()}


class _Hooks:
    """Per-step instrumentation around the trainer's loop."""

    def __init__(self, state: RunState, profiler: Any, profiled: range | None) -> None:
        self.state, self.profiler, self.profiled = state, profiler, profiled or range(0)

    def before_step(self, step: int) -> None:
        dog = self.state.watchdog
        if dog is not None:
            dog.step_started(step)
            if self.profiled and step == self.profiled.start:
                dog.pause_memory(True)  # the profiler's footprint is not the workload's (see Watchdog)

    def after_step(self, record: StepRecord) -> None:
        if self.state.watchdog is not None:
            self.state.watchdog.step_finished()
        if self.profiler is not None:
            self.profiler.step()  # closes ProfilerStep#N right after the timed work (writes the trace at the end)
        if self.profiled and record.step == self.profiled[-1]:
            # The trace is on disk now (repeat=1: the profiler never records again). Drop its in-memory copy
            # of every event and trim the heap, so RSS carries no trace of the profiler for the rest of the run.
            if self.profiler is not None:
                self.profiler.profiler = None
            gc.collect()
            instrument.release_free_heap()
            if self.state.watchdog is not None:
                self.state.watchdog.pause_memory(False)
        assert self.state.recorder is not None
        self.state.recorder.record(record, profiled=record.step in self.profiled)


def _error_text(err: BaseException) -> str:
    summary = f"{type(err).__name__}: {err}".strip()
    if isinstance(err, StepwiseError):
        return summary  # already one actionable sentence
    lines = [line for line in "".join(traceback.format_exception(err)[-6:]).splitlines() if line.strip()]
    if lines and lines[-1].endswith(str(err)):  # the exception's own line: the summary already says it
        lines.pop()
    kept: list[str] = []
    for line in reversed(lines):  # whole lines from the end, up to ~1500 characters (never cut mid-path)
        if kept and sum(len(k) + 1 for k in kept) + len(line) > 1500:
            kept.insert(0, "…")
            break
        kept.insert(0, line)
    return "\n".join([summary, *kept])


def _train(state: RunState) -> None:
    spec, info = state.spec, state.info
    assert spec is not None
    state.trainer = trainer = Trainer.build(spec, info)
    from stepwise_agent.noise_scale import install_if_asked

    install_if_asked(state.run_dir, info.rank)  # the gradient noise scale, when the launcher asked (to-quality)
    state.setup_s = time.time() - state.started  # imports, data generation, model build, process group
    state.recorder = RunRecorder(state.run_dir, info.rank, trainer.total_steps, tensorboard=not state.bare,
                                 leader=info.local_rank == 0)
    cuda = trainer.device.type == "cuda"
    profiler = None if state.bare else instrument.make_profiler(spec, state.run_dir / "tb", info.rank, cuda)
    if profiler is not None and trainer.total_steps < spec.warmup_steps + spec.profile_wait + 1:
        trainer.warnings.append("the run ends before the profiler's window starts: no trace recorded")
    profiled = instrument.profiled_steps(spec) if profiler is not None else None
    with profiler if profiler is not None else contextlib.nullcontext():
        trainer.run(_Hooks(state, profiler, profiled))


def _start_watch(state: RunState) -> None:
    spec = state.spec
    assert spec is not None
    if not state.bare or spec.memory_budget_mb is not None or spec.step_timeout_s is not None:
        on_oom = lambda peak: state.finish_abnormally(  # noqa: E731
            "out_of_memory", f"memory budget exceeded: {peak:.0f} MB > memory_budget_mb={spec.memory_budget_mb}",
            EXIT_OUT_OF_MEMORY)
        on_timeout = lambda step: state.finish_abnormally(  # noqa: E731
            "failed", f"step {step} exceeded step_timeout_s={spec.step_timeout_s}", EXIT_FAILED)
        # On CUDA the budget is enforced by the allocator (set_per_process_memory_fraction), not RSS.
        cpu_budget = spec.memory_budget_mb if not (spec.device != "cpu" and torch.cuda.is_available()) else None
        state.watchdog = instrument.Watchdog(cpu_budget, spec.step_timeout_s, on_oom, on_timeout)
        state.watchdog.start()
    if not state.bare and state.info.local_rank == 0:
        interval = float(os.environ.get(TELEMETRY_INTERVAL_ENV, "0.1"))
        roots = [os.getpid()]
        if state.info.launched and state.info.local_world_size > 1:
            roots = _local_rank_pids()
        state.telemetry = TelemetryProcess(state.run_dir / "telemetry.jsonl", interval_s=interval, root_pids=roots)
        state.telemetry.start()


def _local_rank_pids() -> list[int]:
    """Under torchrun the ranks of this node are the agent's children: host telemetry covers all of them."""
    import psutil

    try:
        agent = psutil.Process().parent()
        if agent is None:  # no parent left (the agent died): this rank alone
            return [os.getpid()]
        return [p.pid for p in agent.children()] or [os.getpid()]
    except psutil.Error:
        return [os.getpid()]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m profilers.run.worker RUN_DIR", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    state = RunState(run_dir, trainer_dist.DistInfo.from_env())
    try:
        state.spec = TrainingSpec.from_json((run_dir / "spec.json").read_text(encoding="utf-8"))
        _start_watch(state)
        _train(state)
        rows = trainer_dist.gather_floats(state.recorder.step_times(state.spec.warmup_steps)
                                          if state.recorder else [], state.info)
        if state.info.local_rank == 0:  # the leader of this node's run folder (rank 0 on a single node)
            per_rank = [median_iqr(r)[0] for r in rows]
            slowest = max(range(len(per_rank)), key=lambda i: per_rank[i] or 0.0)
            result = state.result("ok", None, rank_step_time_ms=per_rank, slowest_rank=slowest)
            write_json_atomic(run_dir / RESULT_FILE, result)
            write_json_atomic(run_dir / PROGRESS_FILE, _final_progress(result))
        code = EXIT_OK
    except (torch.OutOfMemoryError, MemoryError) as err:
        state.finish_abnormally("out_of_memory", _error_text(err), EXIT_OUT_OF_MEMORY)
    except Exception as err:
        state.finish_abnormally("failed", _error_text(err), EXIT_FAILED)
    finally:
        if state.watchdog is not None:
            state.watchdog.stop()
        if state.telemetry is not None:
            state.telemetry.stop()
        if state.recorder is not None:
            state.recorder.close()
    trainer_dist.shutdown()
    return code


def exit_now(code: int) -> None:
    """End the process once its outputs are durable (atomic writes, closed files), without running C++ static
    destructors: under torchrun with gloo, torch 2.13 sometimes aborts in teardown ("terminate called without
    an active exception") *after* a run that wrote an ``ok`` result — measured in 2 of ~30 two-rank runs —
    and the agent would then report the whole job as failed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
