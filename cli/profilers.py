"""Command line: ``python -m profilers run|launch|list|watch|capture``.

- ``run WORKLOAD [--set KEY=VALUE]… [--steps N] [--size tiny|bench] [--json] [--store DIR]``: the workload's own
  training script (``python -m sample_runs.train WORKLOAD FLAGS…``, :mod:`cli.workloads`), launched as ``launch``
  launches a user's: the settings become its flags and the launcher's (ranks, memory budget)
- ``launch [--steps N] [--nproc-per-node N [--nnodes M --rdzv-endpoint HOST:PORT]] [--json] [--label L]
  [--store DIR] -- python train.py ARGS…`` (every rank instrumented, under torchrun when N × M > 1)
- ``list [--json] [--kind run|launch|upload] [--limit N] [--store DIR]``
- ``watch [options] -- python train.py ARGS…`` and ``capture RUN``: :mod:`cli.watch`

``run`` and ``launch`` print the same JSON (``--json``): ``run_id``, ``run_dir``, ``status``,
``steps_done``, ``step_time_ms`` (the time per step: elapsed ÷ steps, so × ``samples_per_s`` it is
the batch), ``typical_step_ms`` (the median step), ``stalled_share``, ``samples_per_s``,
``peak_memory_mb``, ``error`` and the rest of ``result.json``. Exit codes: 0 the run ended ``ok``; 1
it ended ``failed``/``out_of_memory``/``killed`` (the JSON is still printed); 2 bad usage, unknown
workload or bad ``--set``, as one ``error:`` line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn, Sequence

from profilers.errors import StepwiseError
from profilers.run.handle import RunHandle
from profilers.run.records import RUN_KINDS, RunRecord, RunResult, RunStatus
from profilers.store.runs import RunStore
from stepwise_agent import steady

EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE = 0, 1, 2
BAR_WIDTH = 24


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


PROG = "python -m profilers"  # the ``stepwise`` command passes its own name


def _parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description="Instrumented training runs and the run store.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run a registered workload under the profiler")
    run.add_argument("workload")
    run.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a setting, e.g. --set batch_size=64 --set num_workers=2 --set params.images=128 "
        "(python -m sample_runs.train --help lists them)",
    )
    run.add_argument(
        "--steps", type=int, help="optimizer steps to run in all (the profiler's window last)"
    )
    run.add_argument("--size", default="tiny", help="the workload's size preset (tiny, bench, …)")
    launch = sub.add_parser(
        "launch", help="profile an unmodified script: launch [options] -- python train.py …"
    )
    launch.add_argument(
        "--steps", type=int, default=5, help="steps to profile (after 1 wait + 1 warm-up step)"
    )
    launch.add_argument(
        "--nproc-per-node", type=int, default=1, help="ranks on this node, under torchrun"
    )
    launch.add_argument("--nnodes", type=int, default=1, help="nodes (each runs the same command)")
    launch.add_argument("--rdzv-endpoint", help="HOST:PORT of the rendezvous, for --nnodes > 1")
    launch.add_argument(
        "--trace-ranks",
        type=_trace_ranks,
        metavar="R,R…|slowest",
        help="keep full traces only for these ranks (or the slowest, picked from the per-step "
        "summaries every rank writes); default: every rank",
    )
    launch.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter that runs the script (default: the "
        "command's python as your shell finds it, or the path given)",
    )
    launch.add_argument(
        "--cwd",
        metavar="DIR",
        help="the folder the script runs in (default: this one); relative "
        "paths resolve from it, as after cd DIR in your shell",
    )
    launch.add_argument("target", nargs=argparse.REMAINDER, help="-- python SCRIPT ARGS…")
    for p in (run, launch):
        p.add_argument("--label", help="a name for the run in the run list")
        p.add_argument("--timeout", type=float, help="cancel the run after this many seconds")
        add_first_step_timeout(p)
    lst = sub.add_parser("list", help="list stored runs, newest first")
    lst.add_argument("--kind", choices=RUN_KINDS)
    lst.add_argument("--limit", type=int, default=50)
    lst.add_argument(
        "--all",
        action="store_true",
        help="also list the trial runs of experiments (by default an experiment is one entry)",
    )
    for p in (run, launch, lst):
        _common(p)
    from cli.watch import add_parsers

    add_parsers(sub, _common)
    return parser


def first_step_timeout(text: str) -> float | None:
    """``--first-step-timeout SECONDS``: positive seconds, or 0 for no limit (None)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes seconds, not {text!r}") from None
    if seconds < 0 or seconds != seconds:
        raise argparse.ArgumentTypeError(f"takes seconds of 0 or more (0: no limit), not {text!r}")
    return seconds or None


def add_first_step_timeout(p: argparse.ArgumentParser) -> None:
    from profilers.run.script_spec import DEFAULT_FIRST_STEP_TIMEOUT_S

    p.add_argument(
        "--first-step-timeout",
        type=first_step_timeout,
        default=DEFAULT_FIRST_STEP_TIMEOUT_S,
        metavar="SECONDS",
        help="fail a run whose first training step has not ended this long after the "
        "start, saying what the script printed last "
        f"(default {DEFAULT_FIRST_STEP_TIMEOUT_S:g}; 0: no limit)",
    )


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.add_argument(
        "--store", type=Path, help="run store folder (default: $STEPWISE_HOME or ./runs)"
    )


def result_json(handle: RunHandle, result: RunResult) -> dict[str, Any]:
    """The JSON contract shared by ``run --json`` and ``launch --json``."""
    from profilers.run.handle import AGENT_SETTINGS_FILE
    from profilers.store.files import read_json

    settings = read_json(handle.run_dir / AGENT_SETTINGS_FILE)
    return {
        "run_id": handle.run_id,
        "run_dir": str(handle.run_dir),
        **result.to_dict(),
        "agent_settings": settings if isinstance(settings, list) else [],
    }


def _progress_bar(label: str) -> Any:
    def show(progress: dict[str, Any]) -> None:
        if progress.get("waiting") and not progress.get("step"):  # what a script with no step does
            line = f"\r{label} {progress['waiting']}"[:200].ljust(80)
            print(line, end="", file=sys.stderr, flush=True)
            return
        step, total = int(progress.get("step") or 0), int(progress.get("total_steps") or 0)
        filled = int(BAR_WIDTH * step / total) if total else 0
        loss = progress.get("loss")
        eta = progress.get("eta_s")
        text = f"\r{label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {step}/{total or '?'}"
        text += f"  loss {loss:.4g}" if isinstance(loss, (int, float)) else ""
        text += f"  eta {eta:.0f}s" if isinstance(eta, (int, float)) else ""
        print(text, end="", file=sys.stderr, flush=True)

    return show


def _cwd(cwd: str | None) -> str | None:
    if cwd is None:
        return None
    path = Path(cwd).expanduser().resolve()
    if not path.is_dir():
        raise StepwiseError(f"--cwd {cwd}: no such folder")
    return str(path)


def _follow(handle: RunHandle, args: argparse.Namespace) -> int:
    from profilers.run.handle import follow

    on_progress = None if args.json else _progress_bar(handle.run_id)
    try:
        result = follow(handle, on_progress, args.timeout)
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM/SIGHUP (profilers.run.stopping.Stopped)
        from profilers.run.stopping import Stopped, stop_reason

        handle.cancel(stop_reason(err))
        result = handle.wait()
        if isinstance(err, Stopped):
            _report(handle, result, args)
            raise
    _report(handle, result, args)
    return EXIT_OK if result.status is RunStatus.OK else EXIT_RUN_FAILED


def _report(handle: RunHandle, result: RunResult, args: argparse.Namespace) -> None:
    if not args.json:
        print(file=sys.stderr)  # ends the progress line
    if args.json:
        print(json.dumps(result_json(handle, result), indent=2))
    else:
        figures = [f"{result.steps_done} steps"]
        if result.step_time_ms is not None:
            figures.append(f"{result.step_time_ms:.2f} ms/step")
            typical = steady.typical_note(
                result.step_time_ms, result.typical_step_ms, result.stalled_share
            )
            figures.extend([typical] if typical else [])
        if result.samples_per_s is not None:
            figures.append(f"{result.samples_per_s:.1f} samples/s")
        if result.peak_memory_mb is not None:
            figures.append(f"peak {result.peak_memory_mb:.0f} MiB")
        print(f"{result.status.value}: {', '.join(figures)}\nrun folder: {handle.run_dir}")
        if result.error:
            print(f"error: {result.error}")


def _run(args: argparse.Namespace) -> int:
    from cli.workloads import parse_sets, workload_spec
    from profilers.run.launch import start_script

    if args.steps is not None and args.steps < 1:
        raise StepwiseError(f"--steps must be at least 1, got {args.steps}")
    store = RunStore(args.store)
    values, params = parse_sets(args.sets)
    spec = workload_spec(store.root, args.workload, args.size, values, params, steps=args.steps)
    spec = spec.patch(first_step_timeout_s=args.first_step_timeout)
    return _follow(start_script(spec, store, label=args.label or args.workload), args)


def _trace_ranks(text: str) -> str | list[int]:
    if text == "slowest":
        return text
    try:
        ranks = sorted({int(r) for r in text.split(",") if r.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--trace-ranks takes ranks (0,7) or 'slowest', not {text!r}"
        ) from None
    if not ranks or ranks[0] < 0:
        raise argparse.ArgumentTypeError(f"--trace-ranks takes ranks of 0 or more, not {text!r}")
    return ranks


def _launch(args: argparse.Namespace) -> int:
    from profilers.run.launch import start_launch

    boot = None if args.trace_ranks is None else {"trace_ranks": args.trace_ranks}
    return _follow(
        start_launch(
            args.target,
            RunStore(args.store),
            args.steps,
            args.label,
            nproc_per_node=args.nproc_per_node,
            nnodes=args.nnodes,
            rdzv_endpoint=args.rdzv_endpoint,
            python=args.python,
            boot=boot,
            cwd=_cwd(args.cwd),
            first_step_timeout_s=args.first_step_timeout,
        ),
        args,
    )


def _list(args: argparse.Namespace) -> int:
    store = RunStore(args.store)
    store.recover()
    records = store.list(kind=args.kind, limit=args.limit, trials=args.all)
    trial_runs = {
        r.run_id: [t.run_id for t in store.list(parent=r.run_id, limit=None)]
        for r in records
        if r.kind == "experiment"
    }
    if args.json:
        from profilers.run.captures import capture_records

        captured = {
            r.run_id: capture_records(store.path(r.run_id)) for r in records if _captured(store, r)
        }
        print(
            json.dumps(
                [
                    {
                        **asdict(r),
                        "status": r.status.value,
                        **({"trial_runs": trial_runs[r.run_id]} if r.run_id in trial_runs else {}),
                        **({"captures": captured[r.run_id]} if r.run_id in captured else {}),
                    }
                    for r in records
                ],
                indent=2,
            )
        )
        return EXIT_OK
    for r in records:
        step = f"{r.step_time_ms:9.2f} ms" if r.step_time_ms is not None else " " * 12
        print(
            f"{r.run_id:<44} {r.kind:<10} {r.status.value:<14} {step}  {r.label}{_belongs(r, trial_runs)}"
            f"{_captured(store, r)}"
        )
    return EXIT_OK


def _captured(store: RunStore, r: RunRecord) -> str:
    """`` (watched: 2 captures, see --all)`` for a watched run that captured anything."""
    from profilers.run.captures import capture_folders

    n = len(capture_folders(store.path(r.run_id))) if r.kind == "launch" and not r.parent else 0
    return f"  (watched: {n} capture{'' if n == 1 else 's'}, listed with --all)" if n else ""


def _belongs(r: RunRecord, trial_runs: dict[str, list[str]]) -> str:
    """`` (3 trial runs, from RUN)`` for an experiment; `` [baseline of EXPERIMENT]`` for a trial run."""
    if r.run_id in trial_runs:
        n = len(trial_runs[r.run_id])
        source = f", from {r.source_run}" if r.source_run else ", started from the command line"
        return f"  ({n} trial run{'' if n == 1 else 's'}{source})"
    return f"  [{r.role or 'trial'} of {r.parent}]" if r.parent else ""


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    args = _parser(prog).parse_args(argv)
    try:
        from cli.watch import run_capture, run_watch

        return {
            "run": _run,
            "launch": _launch,
            "list": _list,
            "watch": run_watch,
            "capture": run_capture,
        }[args.command](args)
    except StepwiseError as err:
        print("error: " + " ".join(str(err).split()), file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
