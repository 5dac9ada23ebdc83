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

from advisors.diagnosis import diagnose, diagnosis_json
from cli.job_views import job_json, with_job_views
from profilers.efficiency.mfu import efficiency, from_json as efficiency_from_json
from advisors.verdict import Diagnosis
from advisors.observation import RunFacts, observe
from profilers.trace.breakdown import CATEGORIES, Breakdown
from profilers.errors import StepwiseError
from profilers.trace.memory_snapshot import GIB, MemorySnapshot, gib_device, snapshot_json
from profilers.trace.summary import breakdown_summary
from profilers.telemetry.summary import describe_telemetry


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print usage + exit 2; keep the one-line contract
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
    a = sub.add_parser("analyze", help="break down a trace, a folder of ranks, a zip or a stored run")
    a.add_argument("path")
    a.add_argument("--json", action="store_true", help="print the analysis as JSON")
    a.add_argument("--report", metavar="OUT.html", help="also write a shareable report")
    a.add_argument("--device-memory-gib", type=_positive_gib, metavar="GIB",
                   help="the device's total memory, for a memory snapshot (snapshots do not record it)")
    a.add_argument("--engine", choices=("local", "ray"), default=None,
                   help="where a folder of ranks is read, one summary per rank: this machine's cores (local, "
                        "the default) or a Ray cluster (needs stepwise[cluster])")
    a.add_argument("--address", metavar="HOST:PORT", help="the Ray cluster to use (--engine ray); default: a "
                   "new local one")


def _positive_gib(text: str) -> int:
    try:
        gib = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of GiB: {text!r}") from None
    if not 0 < gib < 1e6:
        raise argparse.ArgumentTypeError(f"a device memory size must be positive GiB, not {text}")
    return int(gib * GIB)


def analyze(path: str, device_memory_bytes: int | None = None, engine: str | None = None,
            address: str | None = None) -> dict[str, Any]:
    """Facts (the breakdown summary, or a run's own figures when it left no trace, or a memory snapshot's
    summary) plus the diagnosis. A folder of two or more rank files is read as map and reduce (one summary per
    rank, :mod:`advisors.job_observation`) on ``engine`` (local cores unless ``ray``); its JSON then also holds
    ``job``, the cross-rank views."""
    from advisors.job_observation import job_files, observe_job

    files = job_files(path)
    if files is None and engine is not None and engine != "local":
        raise StepwiseError(f"{path}: --engine {engine} reads a folder of two or more rank files")
    if files is not None:
        obs, job = observe_job(path, files, engine or "local", address)
        out = result_json(obs.breakdown, obs.run, obs.snapshot, obs.notes, device_memory_bytes, diagnose(obs))
        out["job"] = job_json(job, engine)
        return out
    obs = observe(path, device_memory_bytes)
    out = result_json(obs.breakdown, obs.run, obs.snapshot, obs.notes, device_memory_bytes, diagnose(obs))
    if obs.job is not None:  # a stored run whose ranks wrote summaries: ``job`` from all N, not only the traced
        out["job"] = obs.job
    return out


def result_json(b: Breakdown | None, run: RunFacts | None, snapshot: MemorySnapshot | None, notes: Sequence[str],
                device_memory_bytes: int | None, diagnosis: Diagnosis) -> dict[str, Any]:
    """The ``analyze --json`` document from its parts (shared with ``--report``, which reads the input once)."""
    out = breakdown_summary(b) if b is not None else _no_trace_summary(run, snapshot, notes)
    # One step time per input: a run's own median measured step; the profiled window's median beside it.
    out["profiled_step_time_ms"] = out["step_time_ms"] if b is not None and b.n_steps else None
    if run is not None and run.step_time_ms is not None:
        out["step_time_ms"] = round(run.step_time_ms, 4)
    if run is not None:
        out["run"] = _run_json(run)
    if snapshot is not None:
        out["memory_snapshot"] = snapshot_json(snapshot, device_memory_bytes)
    cpu_peak = run.cpu_matmul_tflops if run is not None else None
    out["efficiency"] = efficiency(b, cpu_peak).to_json() if b is not None and b.n_steps else \
        {"achieved_tflops": None, "peak_tflops": None, "peak_basis": None, "mfu": None, "flops_source": "none",
         "reason": "no profiled steps: nothing to measure"}
    out.update(diagnosis_json(diagnosis))
    return out


def _no_trace_summary(run: RunFacts | None, snapshot: MemorySnapshot | None, notes: Sequence[str]) -> dict[str, Any]:
    """The summary fields for a run that left no trace, or a memory snapshot (zero step time to attribute)."""
    device = run.device if run is not None else ("cuda" if snapshot is not None else None)
    return {"device": device or "unknown", "device_name": device or "unknown", "ranks": [],
            "steps": run.steps_done if run else 0, "steps_inferred": False,
            "step_time_ms": (run.step_time_ms if run else None) or 0.0,
            "breakdown": {c: {"ms": 0.0, "share": 0.0} for c in CATEGORIES}, "warnings": list(notes)}


def _run_json(run: RunFacts) -> dict[str, Any]:
    return {"status": run.status, "error": run.error, "steps_done": run.steps_done,
            "step_time_ms": run.step_time_ms, "step_time_steps": run.step_time_steps,
            "step_time_basis": run.step_time_basis, "samples_per_s": run.samples_per_s,
            "peak_memory_mb": run.peak_memory_mb, "memory_budget_mb": run.memory_budget_mb,
            "final_loss": run.final_loss, "workload": run.spec.workload if run.spec else None,
            "telemetry": run.telemetry.as_dict() if run.telemetry is not None else None,
            # the profiler's own cost apart from the script's (issue 29 item 6)
            "peak_memory_unprofiled_mb": run.peak_memory_unprofiled_mb,
            "peak_memory_profiled_mb": run.peak_memory_profiled_mb, "profile_cut": run.profile_cut,
            "observed_to_end": run.stopped_after is None}


def _print_text(result: dict[str, Any]) -> None:
    print(f"{result['device_name']} · ranks {result['ranks']} · {result['steps']} steps · "
          f"median step {result['step_time_ms']:.2f} ms{_profiled(result)} · bottleneck: {result['bottleneck']}")
    for cat, v in sorted(result["breakdown"].items(), key=lambda kv: -kv[1]["share"]):
        if v["share"] > 0:
            print(f"  {cat:<14} {v['ms']:>10.2f} ms  {100 * v['share']:5.1f}%")
    snap = result.get("memory_snapshot")
    if snap:
        total = f" of {gib_device(int(snap['device_total_gib'] * GIB))}" if snap["device_total_gib"] else \
            " (device size not stated: --device-memory-gib judges capacity)"
        peak = "unknown" if snap["peak_allocated_gib"] is None else f"{snap['peak_allocated_gib']:.2f} GiB"
        print(f"  memory snapshot: peak live {peak}, reserved {snap['reserved_gib']:.2f} GiB"
              f"{total}, {snap['segments']} segments, {snap['oom_events']} out-of-memory events")
        for site in snap["top_sites"]:
            print(f"    {site['gib']:8.2f} GiB  x{site['count']:<4} {site['where']}")
    tel = (result.get("run") or {}).get("telemetry")
    if tel:
        print("  telemetry: " + describe_telemetry(tel))
    eff = result.get("efficiency") or {}
    if eff:  # the words every page uses for it (profilers.efficiency.mfu)
        print(f"  efficiency: {efficiency_from_json(eff).phrase()}")
    for f in result["findings"]:
        print(f"  [{f['rule']} {f['bottleneck']} {100 * f['severity']:.0f}%{_bound(f)}] {f['message']}")
        for m in f.get("rules", []):
            print(f"      same time, {m['rule']}: {m['message']}")
    ranking = result.get("ranking") or {}
    if ranking.get("why_first"):
        print(f"  close second: {ranking['why_first']}")
    if ranking.get("fix_order"):
        print("  fixes to try, by gain for effort: " + ", ".join(
            f"{x['fix']} ({x['effort']}, {100 * x['severity']:.0f}%)" for x in ranking["fix_order"]))
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
    print(f"  job: {len(job['ranks'])} ranks x {len(job['steps'])} steps ({job.get('engine', job.get('source'))}"
          f"{traced})")
    s = job.get("straggler")
    if s:
        victims = ", ".join(f"{v['rank']} (+{v['wait_ms']:.2f} ms)" for v in s["victims"][:8])
        more = f" and {len(s['victims']) - 8} more" if len(s["victims"]) > 8 else ""
        print(f"    straggler: rank {s['culprit']}, {s['work_ms']:.2f} ms of work per step against a median "
              f"{s['median_work_ms']:.2f}; waiting on it: {victims or 'no rank'}{more}")
    elif job.get("straggler_reason"):  # why no rank is marked: the sentence every page shows
        print(f"    {job['straggler_reason']}")
    for c in job.get("collectives", [])[:3]:
        worst = max(c["exposed_ms_by_rank"].items(), key=lambda kv: kv[1], default=None)
        print(f"    {c['name'][:60]}: {c['exposed_ms']:.2f} of {c['total_ms']:.2f} ms exposed"
              + (f", most on rank {worst[0]} ({worst[1]:.2f} ms)" if worst else ""))


def _profiled(result: dict[str, Any]) -> str:
    """`` (profiled window: 35.20 ms)`` when a run's median differs from its profiled steps' median."""
    profiled = result.get("profiled_step_time_ms")
    if profiled is None or abs(profiled - result["step_time_ms"]) < 5e-3:
        return ""
    return f" (profiled window: {profiled:.2f} ms)"


def _bound(f: dict[str, Any]) -> str:
    """`` · ≤1.52x``: the most the finding's fix could gain (nothing when the severity is not step time)."""
    return f" · ≤{f['upper_bound_speedup']:.2f}x" if f.get("upper_bound_speedup") else ""


def _analyze_with_report(path: str, out: str, device_memory_bytes: int | None = None, engine: str | None = None,
                         address: str | None = None) -> dict[str, Any]:
    """Analyse once for both: the dashboard's report (HTML, JSON or Markdown by the suffix, written
    atomically) and the ``--json`` document."""
    from advisors.job_observation import job_files, observe_job
    from reports.analysis import SUMMARY_RANKS, analyse_path, job_analysis  # the outermost layer may use reports
    from reports.export import write_report

    files = job_files(path)
    # A folder of many ranks is read once, from its ranks' summaries, for both the report and the JSON (as on the
    # dashboard: never every rank's events at once); a smaller one is loaded whole for the report's timeline.
    observed = observe_job(path, files, engine or "local", address) \
        if files is not None and len(files) >= SUMMARY_RANKS else None
    analysis = (job_analysis(path, Path(path).name, observed=observed) if observed is not None else None) \
        or analyse_path(path, device_memory_bytes=device_memory_bytes)
    analysis = with_job_views(analysis, path, files, observed, engine, address)
    try:
        write_report(analysis, out)
    except ValueError as err:  # an unknown suffix
        raise StepwiseError(str(err)) from None
    except OSError as err:
        raise StepwiseError(f"{out}: cannot write the report ({err.strerror})") from None
    if analysis.diagnosis is None:
        raise StepwiseError(analysis.advisor_note or "the advisor could not judge this input")
    doc = result_json(analysis.breakdown, analysis.run, analysis.snapshot, analysis.notes, device_memory_bytes,
                      analysis.diagnosis)
    # The same ``job`` as without --report: a folder of ranks' views from their summaries (cached beside the traces,
    # so a smaller folder's ranks are read a second time only when no summary is cached), a run's from its agent
    # summaries.
    if analysis.job is not None:  # a folder's (above), or a run's from its ranks' summaries
        doc["job"] = analysis.job
    return doc


def _analyze_command(args: argparse.Namespace) -> dict[str, Any]:
    """``analyze``, with a last resort: whatever else escapes while reading the input is bad input too, said in
    one line (an input the readers did not foresee must not end in a traceback)."""
    try:
        if args.report:
            return _analyze_with_report(args.path, args.report, args.device_memory_gib, args.engine, args.address)
        return analyze(args.path, args.device_memory_gib, args.engine, args.address)
    except (StepwiseError, MemoryError):
        raise
    except Exception as err:  # not BaseException: KeyboardInterrupt and SystemExit keep their meaning
        detail = " ".join(f"{type(err).__name__}: {err}".split())
        detail = detail if len(detail) <= 300 else detail[:297] + "..."
        raise StepwiseError(f"could not analyse {args.path}: {detail}") from err


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    script: list[str] = []
    if "--" in argv:  # everything after -- is the user's command, never our options
        cut = argv.index("--")
        argv, script = argv[:cut], argv[cut + 1:]
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
        to_json = getattr(err, "to_json", None)  # a failed baseline: the JSON says failed, with the stderr tail
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

        print("\n".join(result["table"] + ([] if getattr(args, "quiet", False) else changes_text(result))))
    elif args.command == "compare":
        from cli import compare as cli_compare

        cli_compare.print_text(result)
    else:
        _print_text(result)
    return code
