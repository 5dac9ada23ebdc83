"""The watch mode's step recorder: the script runs to its own end with the profiler off, every step is recorded,
and the profiler is started only when :mod:`stepwise_agent.trigger` says the run changed (or the user asks).

Every step's record (the same fields as :class:`stepwise_agent.recorder.StepRecorder`'s: rank, step, wall_ms, loss,
samples, data_ms, profiled, t_unix_ns, rss_mb, plus ``backward_ms``: the time inside the step's backward calls,
where DDP's all-reduce waits for the slowest rank, and ``capture`` on a profiled step) is a tuple the training thread
appends to :class:`stepwise_agent.step_log.StepLog`'s queue: its daemon thread writes them (whole, or rolled up past
the first steps: a bounded run folder), ``progress.json`` and looks for an on-demand request twice a second. A step
costs a few microseconds of bookkeeping, never a file write.

A capture: when a rule fires at step ``s`` (and :class:`~stepwise_agent.trigger.RateLimit` allows it), a
``torch.profiler`` starts at once; step ``s+1`` is its warm-up, steps ``s+2 … s+1+K`` are recorded, and the trace
is written to ``captures/r{R}c{N}/rank{R}.<ns>.pt.trace.json.gz`` beside ``capture.json`` (``rank``, ``trigger``:
kind, step and reason, ``steps``: [first, last] profiled, ``status``: ``done``, ``cut`` or ``empty``, and the
times). ``capture.json`` is written last: a folder with it is complete, and the runner (outside this process)
turns it into a run of its own and analyses it. A rule that fires while captures are refused is logged with the
refusal in ``watch_events.jsonl``.

On demand: a ``capture.request`` file in the run folder (``stepwise capture RUN``: ``{"steps": K}``) starts a
capture within a second, whatever the rate limit (the user asked for it). The runner's rank watch
(:mod:`profilers.run.rank_watch`) writes the same file with ``ranks`` (only those ranks capture), ``at_step`` (the
step they all start at, so their windows line up), ``trigger`` (its rule and words; the runner limits how often it
asks: a rank refusing would leave the others' captures without it) and ``job`` (kept in each rank's
``capture.json`` with the ranks asked: the runner stores the ranks' captures of one request as one run).

The memory guard's signal (SIGUSR1): during a capture the capture is cut at the step's end (its trace so far
exported), the phase becomes ``cut`` (the runner's guard then allows the script its own growth) and the script
runs on with no further capture; otherwise the step is interrupted (:class:`MemoryGuardStop`), as in a plain
launch.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

import torch

from stepwise_agent.hostinfo import RssReader, available_memory_bytes, current_rss_mb
from stepwise_agent.step_log import WAKE_ROWS, StepLog
from stepwise_agent.recorder import GUARD_SIGNAL, RUNNING, MemoryGuardStop, write_json_atomic
from stepwise_agent.trigger import (
    CPU_MIN_RISE,
    MEMORY,
    MIN_JUDGED_S,
    MIN_RISE,
    ON_DEMAND,
    WARMUP_STEPS,
    Fired,
    RateLimit,
    Trigger,
    near_capture,
)

CAPTURE_STEPS = 3
REQUEST_FILE = "capture.request"
CAPTURES = "captures"
# progress.json "phase", as the recorder's
UNPROFILED, PROFILING, CUT = "unprofiled", "profiling", "cut"


def memory_limit_mb(budget_mb: float | None, env_limit: str | None) -> float | None:
    """The memory a watched process may reach: the budget, else the memory guard's limit, else the device's total
    (a GPU) or this host's memory available now plus what the process already holds."""
    if budget_mb:
        return float(budget_mb)
    if env_limit:
        try:
            return float(env_limit)
        except ValueError:
            pass
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory / 2**20
    rss = current_rss_mb() or 0.0
    return available_memory_bytes() / 2**20 + rss if available_memory_bytes() else None


class WatchRecorder:
    """Records every step, fires captures on the trigger's rules (see the module docs)."""

    def __init__(
        self,
        run_dir: Path,
        capture_steps: int = CAPTURE_STEPS,
        rank: int = 0,
        leader: bool = True,
        limit_mb: float | None = None,
        rate: RateLimit | None = None,
        judged_s: float | None = None,
        min_rise: float | None = None,
    ) -> None:
        self.run_dir, self.capture_steps, self.rank, self.leader = (
            run_dir,
            max(int(capture_steps), 1),
            rank,
            leader,
        )
        # the floor of a step-time rise: given, or chosen once the warm-up is over (the model is on its device)
        self._rise_given = min_rise is not None
        self.trigger = Trigger(
            limit_mb,
            MIN_JUDGED_S if judged_s is None else judged_s,
            MIN_RISE if min_rise is None else min_rise,
        )
        self.rate = rate or RateLimit()
        self.steps_done = 0
        self.last_loss: float | None = None
        self.phase = UNPROFILED
        self.total = 0  # no planned end: the script decides
        self.wait = 0
        self.cut_during_step: int | None = None
        self.captures: list[dict[str, Any]] = []
        self.data_ms: Callable[[], float | None] | None = None
        # progress.json: the writer thread's, and the training thread's
        self._progress_lock = threading.Lock()
        # a capture request the writer thread saw (capture.request)
        self._requested: dict[str, Any] | None = None
        self.backward_ms: Callable[[], float | None] | None = None
        self._armed: tuple[int, Fired, int, dict[str, Any] | None] | None = (
            None  # (at step, trigger, steps, job)
        )
        self._events = run_dir / "watch_events.jsonl"
        self._windows: list[tuple[int, int]] = []
        self._prof: Any = None
        self._capture: dict[str, Any] | None = None
        self._cut_pending = False
        self._request_seen = self._request_mtime()
        self._cuda = torch.cuda.is_available()
        self._rss = RssReader()
        self._started = time.time()
        self._t_last = time.perf_counter()
        self._steplog = StepLog(run_dir, rank, tick=self._tick)
        self._rows = self._steplog.rows

    # -- the step ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        signal.signal(GUARD_SIGNAL, lambda signum, frame: self.on_guard_signal())
        self._t_last = time.perf_counter()

    def on_step(self, loss: float | None, samples: int | None) -> None:
        if self._cuda and torch.cuda.is_initialized():
            torch.cuda.synchronize()  # the step's kernels belong to the step
        now = time.perf_counter()
        wall_ms = (now - self._t_last) * 1000.0
        step = self.steps_done
        data_ms = self.data_ms() if self.data_ms is not None else None
        backward_ms = self.backward_ms() if self.backward_ms is not None else None
        memory = self._memory_mb()
        capture = self._capture
        profiled = capture is not None and capture["steps"][0] <= step <= capture["steps"][1]
        self._rows.append(
            (
                step,
                wall_ms,
                loss,
                samples,
                data_ms,
                profiled,
                time.time_ns(),
                memory,
                capture["n"] if profiled and capture is not None else None,
                backward_ms,
            )
        )
        self.steps_done += 1
        self.last_loss = loss
        if step == WARMUP_STEPS and not self._rise_given:
            self.trigger.min_rise = (
                MIN_RISE if self._cuda and torch.cuda.is_initialized() else CPU_MIN_RISE
            )
        if capture is not None:
            self._advance_capture(step)
        else:
            fired = self.trigger.observe(
                step, wall_ms, data_ms, memory, near_capture(step, self._windows)
            )
            if fired is not None:
                self._fire(fired)
            elif self._armed is not None and self.steps_done >= self._armed[0]:
                _, asked, steps, job = self._armed
                self._armed = None
                if (
                    self.phase != CUT
                ):  # the runner limits its own requests: every rank asked must capture
                    self._start_capture(asked, steps, job)
        if len(self._rows) >= WAKE_ROWS:
            self._steplog.wake()
        if self._requested is not None:
            self._on_request()
        self._t_last = time.perf_counter()  # our own bookkeeping is not the script's step time

    def _memory_mb(self) -> float | None:
        if self._cuda and torch.cuda.is_initialized():
            return torch.cuda.memory_allocated() / 2**20
        return self._rss.mb()

    def _tick(self) -> None:
        """The writer thread's work after each flush: the progress, and whether a capture was asked for."""
        if self.leader:
            self.write_progress(self.last_loss, RUNNING)
        mtime = self._request_mtime()
        if mtime != self._request_seen:
            self._request_seen = mtime
            if mtime is not None:
                self._requested = self._read_request()

    def _on_request(self) -> None:
        """Act on a request the writer thread read; one that comes while a capture runs waits for its end (a rank
        watch's request met the rank's own step-time capture on a busy host and was lost)."""
        if self._capture is not None:
            return
        request, self._requested = self._requested, None
        if request is not None and self.phase != CUT:
            self._asked(request)

    def _asked(self, request: dict[str, Any]) -> None:
        """A request in ``capture.request``: on demand now, or the rank watch's for some ranks at a step."""
        steps = self._requested_steps(request)
        ranks, trigger = request.get("ranks"), request.get("trigger")
        if isinstance(ranks, list) and self.rank not in ranks:
            return
        if not isinstance(trigger, dict):
            self._start_capture(
                Fired(ON_DEMAND, self.steps_done - 1, "asked for (stepwise capture)"), steps
            )
            return
        raw = trigger.get("numbers")
        numbers: dict[str, Any] = raw if isinstance(raw, dict) else {}
        fired = Fired(
            str(trigger.get("kind")),
            int(trigger.get("step") or 0),
            str(trigger.get("reason") or ""),
            tuple((str(k), float(v)) for k, v in numbers.items() if isinstance(v, (int, float))),
        )
        job = (
            {"id": str(request["job"]), "ranks": [int(r) for r in ranks]}
            if request.get("job") and isinstance(ranks, list)
            else None
        )
        self._armed = (int(request.get("at_step") or 0), fired, steps, job)

    def flush(self) -> None:
        """Write every row so far now (the step log's own thread does it every second) and the progress."""
        self._steplog.flush()
        if self.leader:
            self.write_progress(self.last_loss, RUNNING)

    # -- captures ----------------------------------------------------------------------------------------------
    def _fire(self, fired: Fired) -> None:
        refusal = (
            "the memory guard cut a capture: no more captures in this run"
            if self.phase == CUT
            else self.rate.refusal()
        )
        if refusal is not None:
            self._log(
                {"event": "refused", "rank": self.rank, "trigger": fired.to_json(), "why": refusal}
            )
            return
        self._start_capture(fired, self.capture_steps)

    def _start_capture(self, fired: Fired, steps: int, job: dict[str, Any] | None = None) -> None:
        n = len(self.captures) + 1
        first = self.steps_done + 1  # the next step is the profiler's warm-up
        self._capture = {
            "n": n,
            "rank": self.rank,
            "trigger": fired.to_json(),
            "steps": [first, first + steps - 1],
            "started_unix": time.time(),
            "t0": time.perf_counter(),
            "status": "running",
            "folder": f"r{self.rank}c{n:03d}",
            **({"job": job} if job else {}),
        }
        (self.run_dir / CAPTURES / self._capture["folder"]).mkdir(parents=True, exist_ok=True)
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self._cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._prof = torch.profiler.profile(
            activities=activities,
            profile_memory=True,
            record_shapes=True,
            schedule=torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1),
            on_trace_ready=self._export,
        )
        self.rate.started()
        self._log(
            {
                "event": "capture",
                "rank": self.rank,
                "n": n,
                "trigger": fired.to_json(),
                "steps": self._capture["steps"],
            }
        )
        self.phase = PROFILING
        self.flush()  # the rows before it, and the phase, are on disk before the profiler's cost begins
        self._prof.start()

    def _advance_capture(self, step: int) -> None:
        assert self._capture is not None and self._prof is not None
        if self._cut_pending:
            self._capture["status"] = "cut"
            self._cut_pending = False
            self.cut_during_step = step
            self._end_capture()
            self.phase = CUT  # the runner's guard waits for it; no capture again: the profile outgrew memory once
            if self.leader:
                self.write_progress(self.last_loss, RUNNING)
            return
        self._prof.step()
        if step >= self._capture["steps"][1]:
            self._end_capture()

    def _end_capture(self) -> None:
        capture, prof = self._capture, self._prof
        assert capture is not None and prof is not None
        prof.stop()  # exports (on_trace_ready) when it recorded anything
        self._prof = None
        last = min(capture["steps"][1], self.steps_done - 1)
        capture["steps"][1] = last
        if capture["status"] == "running":
            capture["status"] = "done" if capture.get("trace") else "empty"
        spent = time.perf_counter() - capture.pop("t0")
        self.rate.spent(spent)
        capture.update(finished_unix=time.time(), cost_s=round(spent, 3))
        self._windows.append((capture["steps"][0], last))
        self.captures.append(capture)
        self._capture = None
        self.phase = UNPROFILED
        # RSS keeps the profiler's buffers after a capture: a trend across one is not the script's
        on_device = self._cuda and torch.cuda.is_initialized()
        self.trigger.relearn(keep_memory=capture["trigger"]["kind"] != MEMORY and on_device)
        self.flush()  # the window's rows are on disk before the capture says it is complete
        write_json_atomic(self.run_dir / CAPTURES / capture["folder"] / "capture.json", capture)

    def _export(self, prof: Any) -> None:
        assert self._capture is not None
        folder = self.run_dir / CAPTURES / self._capture["folder"]
        name = f"rank{self.rank}.{time.time_ns()}.pt.trace.json"
        partial = (
            folder / f"{name}.partial.gz"
        )  # not a trace name until complete; .gz makes torch gzip it
        prof.export_chrome_trace(str(partial))
        os.replace(partial, folder / f"{name}.gz")
        self._capture["trace"] = f"{name}.gz"

    def on_guard_signal(self) -> None:
        """Memory past the limit: a capture is cut (the profile is what grows); otherwise the run ends."""
        if self._capture is not None:
            self._cut_pending = True
            return
        raise MemoryGuardStop("Stepwise's memory guard ended the run: memory passed its limit")

    # -- files -------------------------------------------------------------------------------------------------
    def _request_mtime(self) -> int | None:
        try:
            return os.stat(self.run_dir / REQUEST_FILE).st_mtime_ns
        except OSError:
            return None

    def _read_request(self) -> dict[str, Any]:
        try:
            with open(self.run_dir / REQUEST_FILE, encoding="utf-8") as fh:
                request = json.load(fh)
        except (OSError, ValueError):
            return {}
        return request if isinstance(request, dict) else {}

    def _requested_steps(self, request: dict[str, Any]) -> int:
        try:
            return max(1, min(int(request.get("steps", self.capture_steps)), 100))
        except (ValueError, TypeError):
            return self.capture_steps

    def _log(self, event: dict[str, Any]) -> None:
        with open(self._events, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**event, "t_unix": time.time()}) + "\n")

    def write_progress(self, loss: float | None, status: str) -> None:
        with self._progress_lock:
            write_json_atomic(
                self.run_dir / "progress.json",
                {
                    "step": self.steps_done,
                    "total_steps": None,
                    "loss": loss,
                    "eta_s": None,
                    "elapsed_s": time.time() - self._started,
                    "status": status,
                    "phase": self.phase,
                    "updated_unix": time.time(),
                    "captures": len(self.captures),
                    "watch": True,
                },
            )

    def memory_facts(self) -> dict[str, Any]:
        return {
            "peak_rss_unprofiled_mb": None,
            "peak_rss_profiled_mb": None,
            "profile_cut_during_step": self.cut_during_step,
        }

    def stop(self) -> None:
        """The script ended: a capture in progress is closed with what it holds; the last rows are written."""
        if self._capture is not None:
            self._end_capture()
        self._steplog.close()
        if self.leader:
            self.write_progress(self.last_loss, RUNNING)
        self._rss.close()


def watch_recorder(
    run_dir: Path, cfg: dict[str, Any], budget_mb: float | None, rank: int, leader: bool
) -> WatchRecorder:
    """The recorder ``boot.json``'s ``watch`` asks for: ``capture_steps``, ``per_hour``, ``max_share``,
    ``judged_s``, ``min_rise``."""
    from stepwise_agent.trigger import MAX_PER_HOUR, MAX_SHARE

    rate = RateLimit(int(cfg.get("per_hour", MAX_PER_HOUR)), float(cfg.get("max_share", MAX_SHARE)))
    limit = memory_limit_mb(budget_mb, os.environ.get("STEPWISE_MEMORY_LIMIT_MB"))
    judged, rise = cfg.get("judged_s"), cfg.get("min_rise")
    return WatchRecorder(
        run_dir,
        int(cfg.get("capture_steps", CAPTURE_STEPS)),
        rank,
        leader,
        limit,
        rate,
        float(judged) if isinstance(judged, (int, float)) else None,
        float(rise) if isinstance(rise, (int, float)) else None,
    )


def watch_warnings(rec: WatchRecorder) -> list[str]:
    """What the run's result says of the watch: its captures, in a line each."""
    return [
        f"captured steps {c['steps'][0]}–{c['steps'][1]} on rank {c['rank']} ({c['status']}): "
        f"{c['trigger']['reason']}"
        for c in rec.captures
    ]
