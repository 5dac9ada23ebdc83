"""``python -m advisors analyze PATH [--json] [--report OUT.html]`` (and ``optimize``, ``compare``: see
:mod:`cli.optimize`, :mod:`cli.compare`).

Exit codes: 0 analysed; 1 only from ``compare``, for a regression; 2 bad input or usage, with one stderr line
starting ``error:`` (never a traceback).
Any unexpected exception while analysing an input is reported the same way, as
``error: could not analyse PATH: <Type>: <message>`` (KeyboardInterrupt and SystemExit pass through).

Each subcommand imports what it needs when it runs: ``analyze --json`` loads the trace engine and the rules,
never torch, the experiment machinery, plotting or templates (``--report`` loads those it writes with);
``tests/cli/test_quick_analyze.py`` holds it to that.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence

import orjson

from advisors.analysis import analyse
from profilers.efficiency.mfu import from_json as efficiency_from_json
from profilers.errors import StepwiseError
from profilers.telemetry.summary import describe_telemetry
from profilers.efficiency.accelerator import shown_name
from profilers.trace.memory_snapshot import GIB, gib_device
from stepwise_agent import steady


class _Parser(argparse.ArgumentParser):
    def error(
        self, message: str
    ) -> NoReturn:  # argparse would print usage + exit 2; keep the one-line contract
        raise StepwiseError(message)


COMMANDS = ("analyze", "optimize", "compare")
PROG = "python -m advisors"  # the ``stepwise`` command passes its own name


def build_parser(command: str | None = None, prog: str = PROG) -> argparse.ArgumentParser:
    """Every subcommand; or, given the subcommand a command line names, that one alone, so that the others'
    modules (the experiment machinery behind ``optimize``, the regression statistics behind ``compare``) are
    not imported to run it."""
    p = _Parser(prog=prog, description="Why is this PyTorch training slow?")
    sub = p.add_subparsers(dest="command", required=True)
    wanted = command if command in COMMANDS else None
    if wanted in (None, "analyze"):
        _add_analyze(sub)
    if wanted in (None, "optimize"):
        from cli import optimize as cli_optimize

        cli_optimize.add_parser(sub)
    if wanted in (None, "compare"):
        from cli import compare as cli_compare

        cli_compare.add_parser(sub)
    return p


def _named_command(argv: Sequence[str]) -> str | None:
    """The subcommand a command line names: its first word that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def _add_analyze(sub: Any) -> None:
    a = sub.add_parser(
        "analyze", help="break down a trace, a folder of ranks, a zip or a stored run"
    )
    a.add_argument("path")
    a.add_argument("--json", action="store_true", help="print the analysis as JSON")
    a.add_argument("--report", metavar="OUT.html", help="also write a shareable report")
    a.add_argument(
        "--device-memory-gib",
        type=_positive_gib,
        metavar="GIB",
        help="the device's total memory, for a memory snapshot (snapshots do not record it)",
    )
    a.add_argument(
        "--engine",
        choices=("local", "ray"),
        default=None,
        help="where a folder of ranks is read, one summary per rank: this machine's cores (local, "
        "the default) or a Ray cluster (needs stepwise[cluster])",
    )
    a.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="the Ray cluster to use (--engine ray); default: a new local one",
    )


def _positive_gib(text: str) -> int:
    try:
        gib = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of GiB: {text!r}") from None
    if not 0 < gib < 1e6:
        raise argparse.ArgumentTypeError(f"a device memory size must be positive GiB, not {text}")
    return int(gib * GIB)


def analyze(
    path: str,
    device_memory_bytes: int | None = None,
    engine: str | None = None,
    address: str | None = None,
) -> dict[str, Any]:
    """``analyze --json``: the document of the input's one analysis (:func:`advisors.analysis.analyse`, without
    the chart frames the document does not hold). A folder of two or more rank files is read as map and reduce
    (one summary per rank) on ``engine`` (local cores unless ``ray``); its JSON then also holds ``job``, the
    cross-rank views."""
    return analyse(
        path, device_memory_bytes=device_memory_bytes, engine=engine, address=address, charts=False
    ).to_json()


def _measured_nothing(result: dict[str, Any]) -> bool:
    """No step and no step time: a run that failed or was stopped before its first step."""
    return not result.get("steps") and not result.get("step_time_ms")


def _print_text(result: dict[str, Any]) -> None:
    device, steps = shown_name(result["device_name"]), result["steps"]
    if _measured_nothing(result):  # no step time, no bottleneck: the run's own words instead
        error = str((result.get("run") or {}).get("error") or "").partition("\n")[0]
        print(
            f"{device} · {steps} steps · no step was measured: no step time, no bottleneck"
            + (f" (the run ended: {error})" if error else "")
        )
    else:
        print(
            f"{device} · ranks {result['ranks']} · {steps} steps · time per step "
            f"{result['step_time_ms']:.2f} ms{_typical(result)}{_profiled(result)} · "
            f"bottleneck: {result['bottleneck']}"
        )
    for cat, v in sorted(result["breakdown"].items(), key=lambda kv: -kv[1]["share"]):
        if v["share"] > 0:
            print(f"  {cat:<14} {v['ms']:>10.2f} ms  {100 * v['share']:5.1f}%")
    snap = result.get("memory_snapshot")
    if snap:
        total = (
            f" of {gib_device(int(snap['device_total_gib'] * GIB))}"
            if snap["device_total_gib"]
            else " (device size not stated: --device-memory-gib judges capacity)"
        )
        peak = (
            "unknown"
            if snap["peak_allocated_gib"] is None
            else f"{snap['peak_allocated_gib']:.2f} GiB"
        )
        print(
            f"  memory snapshot: peak live {peak}, reserved {snap['reserved_gib']:.2f} GiB"
            f"{total}, {snap['segments']} segments, {snap['oom_events']} out-of-memory events"
        )
        for site in snap["top_sites"]:
            print(f"    {site['gib']:8.2f} GiB  x{site['count']:<4} {site['where']}")
    tel = (result.get("run") or {}).get("telemetry")
    if tel:
        print("  telemetry: " + describe_telemetry(tel))
    eff = result.get("efficiency") or {}
    if eff:  # the words every page uses for it (profilers.efficiency.mfu)
        print(f"  efficiency: {efficiency_from_json(eff).phrase()}")
    for f in result["findings"]:
        print(
            f"  [{f['rule']} {f['bottleneck']} {100 * f['severity']:.0f}%{_bound(f)}] {f['message']}"
        )
        for m in f.get("rules", []):
            print(f"      same time, {m['rule']}: {m['message']}")
    ranking = result.get("ranking") or {}
    if ranking.get("why_first"):
        print(f"  close second: {ranking['why_first']}")
    if ranking.get("fix_order"):
        print(
            "  fixes to try, by gain for effort: "
            + ", ".join(
                f"{x['fix']} ({x['effort']}, {100 * x['severity']:.0f}%)"
                for x in ranking["fix_order"]
            )
        )
    for n in result["not_enough_data"]:
        # a note of no class is about the measurement (other programs' load, …): a caveat, never "not enough
        # data (none)" (the contention warning read as missing data)
        if n["bottleneck"] == "none" and n["reason"] not in result["warnings"]:
            print(f"  caveat: {n['reason']}")
        elif n["bottleneck"] != "none" and n["whole_class"]:
            print(f"  not enough data ({n['bottleneck']}): {n['reason']}")
    for w in result["warnings"]:
        print(f"  warning: {w}")
    job = result.get("job")
    if job:
        _print_job(job)


def _print_job(job: dict[str, Any]) -> None:
    """The cross-rank views in a few lines: ranks, the straggler and who waits on it, the worst collective."""
    traced = f", traced {job['traced_ranks']}" if "traced_ranks" in job else ""
    print(
        f"  job: {len(job['ranks'])} ranks x {len(job['steps'])} steps ({job.get('engine', job.get('source'))}"
        f"{traced})"
    )
    s = job.get("straggler")
    if s:
        victims = ", ".join(f"{v['rank']} (+{v['wait_ms']:.2f} ms)" for v in s["victims"][:8])
        more = f" and {len(s['victims']) - 8} more" if len(s["victims"]) > 8 else ""
        print(
            f"    straggler: rank {s['culprit']}, {s['work_ms']:.2f} ms of work per step against a median "
            f"{s['median_work_ms']:.2f}; waiting on it: {victims or 'no rank'}{more}"
        )
    elif job.get("straggler_reason"):  # why no rank is marked: the sentence every page shows
        print(f"    {job['straggler_reason']}")
    for c in job.get("collectives", [])[:3]:
        worst = max(c["exposed_ms_by_rank"].items(), key=lambda kv: kv[1], default=None)
        print(
            f"    {c['name'][:60]}: {c['exposed_ms']:.2f} of {c['total_ms']:.2f} ms exposed"
            + (f", most on rank {worst[0]} ({worst[1]:.2f} ms)" if worst else "")
        )


def _typical(result: dict[str, Any]) -> str:
    """`` (typical step (median) 2.1 ms, 12% of steps stalled)`` when a run's typical step is
    apart."""
    run = result.get("run") or {}
    said = steady.typical_note(
        result["step_time_ms"], run.get("typical_step_ms"), run.get("stalled_share")
    )
    return f" ({said})" if said else ""


def _profiled(result: dict[str, Any]) -> str:
    """`` (profiled window: 35.20 ms)`` when a run's median differs from its profiled steps' median."""
    profiled = result.get("profiled_step_time_ms")
    if profiled is None or abs(profiled - result["step_time_ms"]) < 5e-3:
        return ""
    return f" (profiled window: {profiled:.2f} ms)"


def _bound(f: dict[str, Any]) -> str:
    """`` · ≤1.52x``: the most the finding's fix could gain (nothing when the severity is not step time)."""
    return f" · ≤{f['upper_bound_speedup']:.2f}x" if f.get("upper_bound_speedup") else ""


def _analyze_with_report(
    path: str,
    out: str,
    device_memory_bytes: int | None = None,
    engine: str | None = None,
    address: str | None = None,
) -> dict[str, Any]:
    """One analysis for both: the report (HTML, JSON or Markdown by the suffix, written atomically; for a stored
    run, with its experiments and environment, as the dashboard's Report page writes it) and the ``--json``
    document."""
    from reports.export import write_report  # the outermost layer may use reports
    from reports.run_report.context import report_extra

    analysis = analyse(
        path, device_memory_bytes=device_memory_bytes, engine=engine, address=address
    )
    try:
        write_report(analysis, out, extra=report_extra(Path(path)))
    except ValueError as err:  # an unknown suffix
        raise StepwiseError(str(err)) from None
    except OSError as err:
        raise StepwiseError(f"{out}: cannot write the report ({err.strerror})") from None
    return analysis.to_json()


def _analyze_command(args: argparse.Namespace) -> dict[str, Any]:
    """``analyze``, with a last resort: whatever else escapes while reading the input is bad input too, said in
    one line (an input the readers did not foresee must not end in a traceback)."""
    try:
        if args.report:
            return _analyze_with_report(
                args.path, args.report, args.device_memory_gib, args.engine, args.address
            )
        return analyze(args.path, args.device_memory_gib, args.engine, args.address)
    except (StepwiseError, MemoryError):
        raise
    except (
        Exception
    ) as err:  # not BaseException: KeyboardInterrupt and SystemExit keep their meaning
        detail = " ".join(f"{type(err).__name__}: {err}".split())
        detail = detail if len(detail) <= 300 else detail[:297] + "..."
        raise StepwiseError(f"could not analyse {args.path}: {detail}") from err


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    script: list[str] = []
    if "--" in argv:  # everything after -- is the user's command, never our options
        cut = argv.index("--")
        argv, script = argv[:cut], argv[cut + 1 :]
    try:
        args = build_parser(_named_command(argv), prog).parse_args(argv)
        code = 0
        args.script = script
        if script and args.command != "optimize":
            raise StepwiseError(f"-- {' '.join(script[:2])} …: only optimize takes a script")
        if args.command == "analyze":
            result = _analyze_command(args)
        elif args.command == "compare":
            from cli import compare as cli_compare

            result, code = cli_compare.main(args)
        else:
            from cli import optimize as cli_optimize

            result = cli_optimize.main(args)
            code = cli_optimize.exit_code(result)
    except StepwiseError as err:
        print(f"error: {err}", file=sys.stderr)
        to_json = getattr(
            err, "to_json", None
        )  # a failed baseline: the JSON says failed, with the stderr tail
        if to_json is not None and getattr(args, "json", False):
            sys.stdout.write(orjson.dumps(to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
        elif to_json is not None and (tail := str(getattr(err, "stderr_tail", ""))):
            print("the script's stderr ends with:\n" + tail, file=sys.stderr)
        return 2
    except MemoryError:
        print("error: the input needs more memory than this machine has", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif args.command == "optimize":
        from cli.optimize import changes_text

        print(
            "\n".join(
                result["table"] + ([] if getattr(args, "quiet", False) else changes_text(result))
            )
        )
    elif args.command == "compare":
        from cli import compare as cli_compare

        cli_compare.print_text(result)
    else:
        _print_text(result)
    return code
