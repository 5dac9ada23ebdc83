"""``stepwise watch [options] -- python train.py ARGS…`` and ``stepwise capture RUN``.

``watch`` runs the user's script to its own end under the agent with the profiler off (every step recorded:
:func:`profilers.run.launch.start_watch`), the job's output shown as it comes, its exit code and the signal that
ended it passed through unchanged (Ctrl-C reaches the job as it would without Stepwise; a second one stops it).
When the agent captures a window (its step time, batch-drawing share or memory changed: :mod:`stepwise_agent.trigger`),
the runner stores it as a run (:mod:`profilers.run.captures`) and this command analyses it here, outside the
training process, with the one analysis (:func:`advisors.analysis.analyse`, stored in the capture's run), then
prints a line beside the job's output::

    stepwise: step 1,141: step time +157% for 60 steps (2.0 s) (…), batch drawing 2% → 69% …; captured steps 1,143–1,145: data — …

``--json`` prints, at the end, the run's JSON (as ``launch --json``) with ``captures``: each capture's ``trigger``
(kind, step, reason), profiled ``steps`` [first, last], ``rank``, ``ranks`` (those that captured: a rank falling
behind and its neighbour, :mod:`profilers.run.rank_watch`), ``bottleneck`` (the analysis's, None when it could
not judge), ``straggler`` (the rank the straggler rule marks in a capture of several ranks, else None),
``verdict`` (the line's words) and ``run_id``; and ``refused``: triggers the rate limit held
back; and ``ranks`` (None for one rank): each rank over the whole run (``ranks``: rank, steps, median_step_ms,
median_work_ms, samples_per_s) and the one straggler rule over it (``straggler``, ``straggler_reason``:
:func:`profilers.run.rank_timeline.reduce_ranks`), the sentence also printed at the end without ``--json``.
With ``--json`` the job's own stdout goes to stderr, so stdout is the JSON alone.

``-- torchrun --nproc_per_node N train.py ARGS…`` runs every rank under the agent (each records its own steps).
``capture RUN [--steps K]`` asks a watched job to profile its next K steps now.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from profilers.errors import StepwiseError
from profilers.run.captures import capture_records, refused, request_capture
from profilers.run.handle import RunHandle
from profilers.run.rank_timeline import reduce_ranks
from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from reports.watch_timeline import (
    straggler,
    verdict,
)  # the capture's line: one function, the report's too

POLL_S = 0.1
_TORCHRUN_VALUE = {
    "--nproc_per_node",
    "--nproc-per-node",
    "--nnodes",
    "--rdzv_endpoint",
    "--rdzv-endpoint",
    "--rdzv_backend",
    "--rdzv-backend",
    "--rdzv_id",
    "--rdzv-id",
    "--node_rank",
    "--node-rank",
    "--master_addr",
    "--master-addr",
    "--master_port",
    "--master-port",
    "--max_restarts",
    "--max-restarts",
    "--log_dir",
    "--log-dir",
    "--tee",
    "-r",
    "-t",
}


def add_parsers(sub: Any, common: Any) -> None:
    """``watch`` and ``capture`` under the ``python -m profilers`` parser (``common``: the shared options)."""
    watch = sub.add_parser(
        "watch", help="watch the whole run: watch [options] -- python train.py …"
    )
    watch.add_argument(
        "--capture-steps", type=int, default=3, help="steps each capture profiles (default 3)"
    )
    watch.add_argument(
        "--captures-per-hour",
        type=int,
        default=None,
        help="at most this many captures an hour (default 6)",
    )
    watch.add_argument(
        "--max-capture-share",
        type=float,
        default=None,
        help="captures never take more than this share of the run's time (default 0.05)",
    )
    watch.add_argument(
        "--judged-s",
        type=float,
        default=None,
        help="a step-time or batch-drawing shift must "
        "hold for this many seconds of steps to fire a capture (default 2)",
    )
    watch.add_argument(
        "--min-rise",
        type=float,
        default=None,
        help="a step-time rise smaller than this share "
        "of the step time fires no capture (default 0.2 for a step on a GPU, 0.5 on the host's "
        "cores, which every other program shares)",
    )
    watch.add_argument(
        "--nproc-per-node", type=int, default=1, help="ranks on this node, under torchrun"
    )
    watch.add_argument("--python", metavar="PATH", help="the interpreter that runs the script")
    watch.add_argument(
        "--cwd", metavar="DIR", help="the folder the script runs in (default: this one)"
    )
    watch.add_argument("--label", help="a name for the run in the run list")
    watch.add_argument(
        "target", nargs=argparse.REMAINDER, help="-- python SCRIPT ARGS… | -- torchrun … SCRIPT …"
    )
    capture = sub.add_parser(
        "capture", help="profile the next steps of a watched run now: capture RUN"
    )
    capture.add_argument("run_id")
    capture.add_argument("--steps", type=int, default=3)
    for p in (watch, capture):
        common(p)


def torchrun_split(command: list[str]) -> tuple[list[str], int, int, str | None]:
    """``torchrun [OPTIONS] SCRIPT ARGS…`` as ``(["python", SCRIPT, ARGS…], nproc_per_node, nnodes,
    rdzv_endpoint)``; any other command unchanged with one rank."""
    argv = command[1:] if command[:1] == ["--"] else list(command)
    if not argv or os.path.basename(argv[0]) != "torchrun":
        return argv, 1, 1, None
    options: dict[str, str] = {}
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        key, _, value = argv[i].partition("=")
        if not value and key in _TORCHRUN_VALUE and i + 1 < len(argv):
            value, i = argv[i + 1], i + 1
        options[key.replace("_", "-")] = value
        i += 1
    if i >= len(argv):
        raise StepwiseError("torchrun: no script to run after its options")
    python = os.path.join(os.path.dirname(argv[0]), "python") if os.sep in argv[0] else "python"
    try:
        nproc = int(options.get("--nproc-per-node", "1"))
        nnodes = int(options.get("--nnodes", "1"))
    except ValueError:
        raise StepwiseError("torchrun: --nproc_per_node and --nnodes take a number here") from None
    return [python, *argv[i:]], nproc, nnodes, options.get("--rdzv-endpoint")


class _Tail:
    """Copies what a log file gains to a stream (the job's output, as it comes)."""

    def __init__(self, path: Path, out: IO[bytes]) -> None:
        self.path, self.out, self.offset = path, out, 0

    def pump(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        if data:
            self.offset += len(data)
            self.out.write(data)
            self.out.flush()


class Analyst:
    """Analyses each stored capture once, in a thread of this process (never the training's)."""

    def __init__(self, store: RunStore, run_id: str, say: IO[str]) -> None:
        self.store, self.run_id, self.say = store, run_id, say
        self.done: dict[str, dict[str, Any]] = {}
        self._busy: threading.Thread | None = None

    def tick(self) -> None:
        if self._busy is not None and self._busy.is_alive():
            return
        todo = [
            c
            for c in capture_records(self.store.path(self.run_id))
            if c["run_id"] and c["run_id"] not in self.done
        ]
        if todo:
            self._busy = threading.Thread(target=self._analyse, args=(todo[0],), daemon=True)
            self._busy.start()

    def finish(self) -> list[dict[str, Any]]:
        """Analyse what is left, then every capture with its verdict, in order."""
        while True:
            if self._busy is not None:
                self._busy.join()
            self.tick()
            if self._busy is None or not self._busy.is_alive():
                break
        out = []
        for c in capture_records(self.store.path(self.run_id)):
            seen = self.done.get(c["run_id"] or "", {})
            out.append(
                {
                    **c,
                    "bottleneck": seen.get("bottleneck"),
                    "verdict": seen.get("verdict"),
                    "straggler": seen.get("straggler"),
                }
            )
        return out

    def _analyse(self, capture: dict[str, Any]) -> None:
        from advisors.analysis import analyse

        try:
            analysis: Any = analyse(self.store.path(capture["run_id"]), charts=False)
        except Exception as err:  # noqa: BLE001 - a capture that cannot be read is said, never a crash
            analysis = None
            note = f"the capture could not be analysed: {err}"
        bottleneck, line = verdict(capture, analysis)
        if analysis is None:
            line += f" ({note})"
        self.done[capture["run_id"]] = {
            "bottleneck": bottleneck,
            "verdict": line,
            "straggler": straggler(analysis)[0],
        }
        print(f"stepwise: {line}", file=self.say, flush=True)


def _forward_signals(handle: RunHandle) -> None:
    """Ctrl-C, SIGTERM and SIGHUP go to the job (its own process group); a second Ctrl-C stops it outright."""
    count = {"n": 0}

    def forward(signum: int, frame: Any) -> None:
        count["n"] += signum == signal.SIGINT
        if count["n"] > 1:
            handle.cancel("interrupted twice from the keyboard")
            return
        if handle.pid is not None:
            try:
                os.killpg(handle.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)


def run_watch(args: argparse.Namespace) -> int:
    from profilers.run.launch import start_watch

    command, nproc, nnodes, rdzv = torchrun_split(args.target)
    nproc = max(nproc, args.nproc_per_node)
    store = RunStore(args.store)
    cwd = str(Path(args.cwd).expanduser().resolve()) if args.cwd else None
    handle = start_watch(
        command,
        store,
        label=args.label,
        capture_steps=args.capture_steps,
        per_hour=args.captures_per_hour,
        max_share=args.max_capture_share,
        judged_s=args.judged_s,
        min_rise=args.min_rise,
        nproc_per_node=nproc,
        nnodes=nnodes,
        rdzv_endpoint=rdzv,
        cwd=cwd,
        python=args.python,
    )
    _forward_signals(handle)
    out = sys.stderr.buffer if args.json else sys.stdout.buffer
    tails = [
        _Tail(handle.run_dir / "stdout.log", out),
        _Tail(handle.run_dir / "stderr.log", sys.stderr.buffer),
    ]
    analyst = Analyst(store, handle.run_id, sys.stderr)
    while not handle.join(POLL_S):
        for tail in tails:
            tail.pump()
        analyst.tick()
    result = handle.wait()
    for tail in tails:
        tail.pump()
    captures = analyst.finish()
    held = refused(handle.run_dir)
    reduced = reduce_ranks(
        handle.run_dir
    )  # a job of several ranks: each rank over the whole run, the straggler
    if args.json:
        print(
            json.dumps(
                {
                    "run_id": handle.run_id,
                    "run_dir": str(handle.run_dir),
                    **result.to_dict(),
                    "captures": captures,
                    "refused": held,
                    "ranks": reduced.to_json() if reduced is not None else None,
                },
                indent=2,
            )
        )
    else:
        print(
            f"stepwise: watched {result.steps_done:,} steps, {len(captures)} capture(s)"
            + (f", {len(held)} held back by the rate limit" if held else "")
            + f"; run folder: {handle.run_dir}",
            file=sys.stderr,
        )
        if reduced is not None:
            print(
                f"stepwise: over the whole run, {reduced.reason[0].lower()}{reduced.reason[1:]}",
                file=sys.stderr,
            )
    return _pass_through(result.exit_code, result.status)


def _pass_through(code: int | None, status: RunStatus) -> int:
    """The job's exit code; a job ended by a signal ends this process by the same signal."""
    if code is not None and code < 0:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1.0)
        return 128 - code
    if code is None:
        return 0 if status is RunStatus.OK else 1
    return code


def run_capture(args: argparse.Namespace) -> int:
    path = request_capture(RunStore(args.store), args.run_id, args.steps)
    print(f"asked {args.run_id} to profile its next {args.steps} step(s) ({path})")
    return 0
