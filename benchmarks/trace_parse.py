"""Trace-engine benchmark: Stepwise vs Holistic Trace Analysis vs a bare ``orjson.loads``.

Usage (from the repo root)::

    .venv/bin/python benchmarks/trace_parse.py [--synthetic-gb 1.0] [--skip-hta] [--repeats 3] [--json OUT]

Two inputs, measured in the same run and printed side by side:

(a) the largest shared real trace, ``<repo>/../shared/traces/communication/hta_v100_2rank_216k_events.json.gz``;
(b) a synthetic Kineto trace of ``--synthetic-gb`` GB (10^9 bytes, uncompressed ``.json``) that this script
    generates itself, deterministically, streaming to a temporary folder (see :func:`generate_kineto_trace`).

Contenders, each measured in a fresh subprocess so that peak memories never mix:

* Stepwise: ``profilers.trace.load.load_trace(path)`` + ``profilers.trace.breakdown.breakdown(trace)``;
* ``orjson.loads`` of the same (decompressed) bytes, already in memory: the floor any Python JSON reader has;
* HTA (``holistictraceanalysis``): ``TraceAnalysis(trace_dir=...)`` + ``get_temporal_breakdown()``, run by the
  python of a separate venv (``.venv-bench``, made by ``benchmarks/_hta_env.sh``), time-boxed and RSS-capped;
* and, as a user times them, two whole processes: ``python -m advisors analyze --json TRACE`` (reading,
  breakdown, the rules' diagnosis and the JSON) and the smallest HTA script doing its load + temporal
  breakdown (``trace_parse_children.HTA_SCRIPT``).

Time is the wall time of the work itself inside the child (imports and interpreter start excluded, listed
separately); for the two whole processes it is their wall time from start to exit, seen by the parent (which
polls every 20 ms, the same for both). Every contender runs once per round, round-robin, so a load change on
a shared machine hits them all alike. Peak memory is the child's peak RSS: ``ru_maxrss`` from ``wait4`` on that child, or the peak of
its whole process tree's RSS polled every 20 ms, whichever is larger (it includes the interpreter and
imports). Targets (issue 2): HTA/Stepwise time >= 5x, Stepwise/orjson time <= 3x, Stepwise peak RSS < 4x the
uncompressed size of the 1 GB trace; (issue 13) HTA/Stepwise whole-process time >= 5x on the 216k-event trace,
>= 20x on the 1 GB one.

The code is in the ``trace_parse_*`` modules beside this file, which is only the command line (and the
``--child`` entry each measured subprocess runs): ``trace_parse_kineto`` writes the synthetic trace (with
``_kineto_format``, ``_kineto_writer`` and ``_kineto_model``), ``trace_parse_children`` is what a child does,
``trace_parse_measure`` runs one under its limits, ``trace_parse_hta`` holds the HTA venv, ``trace_parse_report``
prints the table and ``trace_parse_common`` the shared constants.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if (
    _HERE not in sys.path
):  # loaded by file path (the smoke test) or as ``benchmarks.trace_parse`` (dashboard.py):
    sys.path.append(
        _HERE
    )  # the trace_parse_* modules beside this file are imported by their own names

from trace_parse_children import CHILDREN, KIND_TITLES, KINDS, check_analyze_output, process_command  # noqa: E402
from trace_parse_common import GB, REPO, MiB, fmt_size  # noqa: E402
from trace_parse_hta import HTA_VENV, ensure_hta_venv, hta_folder  # noqa: E402
from trace_parse_kineto import GenInfo, generate_kineto_trace  # noqa: E402
from trace_parse_measure import Run, measure, measure_process  # noqa: E402
from trace_parse_report import InputResult, render  # noqa: E402

__all__ = [
    "GB",
    "KINDS",
    "KIND_TITLES",
    "MiB",
    "REPO",
    "SHARED_TRACE",
    "GenInfo",
    "InputResult",
    "Run",
    "generate_kineto_trace",
    "main",
    "measure",
    "render",
]

SHARED_TRACE = (
    REPO.parent / "shared" / "traces" / "communication" / "hta_v100_2rank_216k_events.json.gz"
)


def _bench_input(
    res: InputResult,
    target: Path,
    repeats: int,
    args: argparse.Namespace,
    hta_py: str | None,
    workdir: Path,
    name: str,
) -> None:
    """Measure every contender ``repeats`` times, round-robin (so a load change on a shared machine hits all
    of them alike). A contender that fails once is not run again."""
    kinds = [k for k in KINDS if not (k.startswith("hta") and args.skip_hta)]
    for k in kinds:
        res.runs[k] = []
    if any(k.startswith("hta") for k in kinds) and hta_py is None:
        for k in [k for k in kinds if k.startswith("hta")]:
            res.runs[k] = [Run(False, reason="the HTA venv could not be created")]
            kinds.remove(k)
    hta_dir = hta_folder(target, workdir, name) if any(k.startswith("hta") for k in kinds) else None
    # Bytecode is cached for every contender, as on a user's machine (pip compiles an installed package; this
    # checkout's modules compile on first import): PYTHONDONTWRITEBYTECODE, set in some sandboxes, would have
    # Stepwise's whole process compile its ~70 modules on every run (~0.08 s of ~1 s), HTA none. The cache
    # lives in the benchmark's temporary folder; one unrecorded run of each whole-process contender fills it.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
    }
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    if repeats > 1:
        for kind in [k for k in kinds if k in ("stepwise_process", "hta_process")]:
            python, where = (
                (str(hta_py), str(hta_dir))
                if kind.startswith("hta")
                else (sys.executable, str(target))
            )
            print(f"  {name}: {kind} warm-up (not counted) ...", flush=True)
            measure_process(
                process_command(kind, python, where),
                kind,
                env=env,
                workdir=workdir,
                timeout=args.hta_timeout,
                rss_cap=int(args.hta_rss_cap_gb * GB),
            )
    for i in range(repeats):
        for kind in kinds:
            if any(not r.ok for r in res.runs[kind]):
                continue
            is_hta = kind.startswith("hta")
            limits = (
                dict(timeout=args.hta_timeout, rss_cap=int(args.hta_rss_cap_gb * GB))
                if is_hta
                else dict(timeout=args.timeout, rss_cap=int(args.rss_cap_gb * GB))
            )
            print(
                f"  {name}: {kind} run {i + 1}/{repeats}"
                + (
                    f" (limits: {args.hta_timeout:.0f} s, RSS {args.hta_rss_cap_gb:g} GB)"
                    if is_hta
                    else ""
                )
                + " ...",
                flush=True,
            )
            python, where = (str(hta_py), str(hta_dir)) if is_hta else (sys.executable, str(target))
            if kind == "stepwise_process":
                run = measure_process(
                    process_command(kind, python, where),
                    kind,
                    env=env,
                    workdir=workdir,
                    check=check_analyze_output,
                    **limits,
                )
            elif kind == "hta_process":
                run = measure_process(
                    process_command(kind, python, where), kind, env=env, workdir=workdir, **limits
                )
            else:
                run = measure(python, kind, where, env=env, workdir=workdir, **limits)
            res.runs[kind].append(run)
            status = f"{run.seconds:.3f} s" if run.ok else f"did not finish: {run.reason}"
            print(f"    -> {status}, peak RSS {fmt_size(run.peak_rss)}", flush=True)


def _uncompressed_size(path: Path) -> int:
    with open(path, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(16 * MiB):
            n += len(chunk)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--synthetic-gb",
        type=float,
        default=1.0,
        help="size of the generated trace, GB (10^9 bytes)",
    )
    ap.add_argument(
        "--skip-hta", action="store_true", help="do not run (or install) Holistic Trace Analysis"
    )
    ap.add_argument(
        "--skip-shared", action="store_true", help="do not benchmark the shared 216k-event trace"
    )
    ap.add_argument(
        "--repeats", type=int, default=3, help="runs per contender on the shared trace (median)"
    )
    ap.add_argument(
        "--big-repeats", type=int, default=1, help="runs per contender on the synthetic trace"
    )
    ap.add_argument(
        "--layers", type=int, default=32, help="synthetic model: transformer layers per micro-batch"
    )
    ap.add_argument(
        "--micro-batches", type=int, default=4, help="synthetic model: micro-batches per step"
    )
    ap.add_argument(
        "--timeout", type=float, default=900, help="time limit per Stepwise/orjson run, s"
    )
    ap.add_argument(
        "--rss-cap-gb", type=float, default=18, help="RSS cap per Stepwise/orjson run, GB"
    )
    ap.add_argument("--hta-timeout", type=float, default=600, help="time limit per HTA run, s")
    ap.add_argument("--hta-rss-cap-gb", type=float, default=16, help="RSS cap per HTA run, GB")
    ap.add_argument("--hta-venv", type=Path, default=HTA_VENV)
    ap.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the synthetic trace goes (default: a temp dir)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the generated trace")
    ap.add_argument(
        "--json", type=Path, default=None, help="also write every figure to this JSON file"
    )
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--child-target", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        result = CHILDREN[args.child](args.child_target)
        Path(args.child_out).write_text(json.dumps(result, default=str))
        return 0

    load_start = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="stepwise-bench-", dir=args.workdir))
    results: list[InputResult] = []
    try:
        hta_py = None if args.skip_hta else ensure_hta_venv(args.hta_venv)
        if not args.skip_shared:
            if SHARED_TRACE.exists():
                res = InputResult(
                    f"shared {SHARED_TRACE.name}",
                    str(SHARED_TRACE),
                    SHARED_TRACE.stat().st_size,
                    _uncompressed_size(SHARED_TRACE),
                    note=f"median of {args.repeats}",
                )
                print(f"[1] {SHARED_TRACE}", flush=True)
                _bench_input(res, SHARED_TRACE, args.repeats, args, hta_py, workdir, "shared")
                results.append(res)
            else:
                print(f"[1] shared trace not found at {SHARED_TRACE}: skipped", flush=True)
        target = int(args.synthetic_gb * GB)
        synth = workdir / "synthetic_rank0.pt.trace.json"
        print(
            f"[2] generating a {args.synthetic_gb:g} GB synthetic Kineto trace in {workdir} ...",
            flush=True,
        )
        info = generate_kineto_trace(
            synth, target, layers=args.layers, micro_batches=args.micro_batches
        )
        print(
            f"    {fmt_size(info.bytes)}, {info.steps} steps, {info.complete_events} X events, "
            f"{info.kernels} kernels ({info.nccl_kernels} NCCL), {info.memory_events} [memory], "
            f"{info.flow_events} flow events; "
            f"generated in {info.seconds:.1f} s",
            flush=True,
        )
        res = InputResult(
            f"synthetic {fmt_size(info.bytes)}",
            str(synth),
            info.bytes,
            info.bytes,
            note=f"{info.steps} steps, {info.complete_events} X events; "
            f"{'median of %d' % args.big_repeats if args.big_repeats > 1 else 'a single run each'}",
        )
        _bench_input(res, synth, args.big_repeats, args, hta_py, workdir, "synthetic")
        results.append(res)
        load = os.getloadavg()
        context = (
            f"machine: {os.cpu_count()} cores; load average {load_start[0]:.1f} at start, {load[0]:.1f} at "
            "the end (other work on a shared machine slows every contender)"
        )
        table = render(results, context)
        print()
        print(table)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(
                json.dumps(
                    {"generated": asdict(info), "results": [asdict(r) for r in results]},
                    indent=1,
                    default=str,
                )
            )
    finally:
        if args.keep:
            print(f"(kept {workdir})")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
