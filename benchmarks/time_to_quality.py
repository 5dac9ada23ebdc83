"""Time to quality on this machine: changes that alter convergence, judged by the time to the same target.

    .venv/bin/python benchmarks/time_to_quality.py [--seeds 3] [--only digits,compute_bound,script,script_injected] [--store DIR]
    .venv/bin/python benchmarks/time_to_quality.py --only noise_digits,noise_compute_bound,noise_script,noise_script_val

The ``noise_*`` cases (:mod:`benchmarks.time_to_quality_noise`) put the gradient noise scale's predictions for
batch × 2, 4, 8 beside the measured time-to-target ratios.

Every arm runs through :func:`advisors.experiments.to_quality.to_quality` — the code path of ``optimize
--to-quality`` — with its runs kept in a run store (default a fresh temporary folder). Per case: the target
(from the baseline's own curve at 80 % of its budget), each arm's MLPerf time to target (K seeds, fastest and
slowest dropped) with its per-seed spread, the ratio with its 95 % bootstrap interval, and the verdict. The
script case (``benchmarks/scripts/digits_quality_train.py``) is judged on the validation accuracy it prints
(``--metric``, goal max); its larger batch is the "change it yourself" edit, made by its command-line flags.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisors.experiments.to_quality import QualitySpec, store_curve_runner, to_quality  # noqa: E402
from advisors.experiments.to_quality_report import quality_json  # noqa: E402
from advisors.quality import candidates as cands
from advisors.quality.script_candidates import templates  # noqa: E402
from advisors.quality.target import Budget  # noqa: E402
from profilers.run.script_spec import ScriptSpec  # noqa: E402
from profilers.store.runs import RunStore  # noqa: E402
from cli.optimize_quality import script_applied, script_resolve  # noqa: E402
from cli.workloads import workload_spec  # noqa: E402
from profilers.run.script_spec import MAX_STEPS  # noqa: E402

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "scripts" / "digits_quality_train.py"
METRIC = r"val_acc=([0-9.]+)"


def script_args(batch: int, lr: float) -> tuple[str, ...]:
    return (
        sys.executable,
        str(SCRIPT),
        "--batch-size",
        str(batch),
        "--lr",
        str(lr),
        "--steps",
        "100000",
    )


def apply_script(spec: QualitySpec, cand: cands.Candidate) -> QualitySpec:
    assert isinstance(spec, ScriptSpec) and cand.patch is not None
    return replace(spec, command=script_args(int(cand.patch["batch"]), float(cand.patch["lr"])))


def inject(spec: QualitySpec, cand: cands.Candidate) -> QualitySpec:
    """A workload's candidate, resolved from its baseline run: its knobs injected into the workload's script."""
    assert cand.patch is not None
    return spec.patch(inject=dict(cand.patch))


def cases(
    store: RunStore,
) -> dict[
    str, tuple[QualitySpec, list[cands.Candidate], Budget, Callable[..., Any], str | None, str]
]:
    # the workloads' own scripts: digits batch 32, SGD lr 0.1, 512 samples; compute_bound batch 128, SGD lr 0.01,
    # a 3×1024 MLP (compute fills the CPU); their candidates made concrete from the baseline as a script's are
    digits = workload_spec(store.root, "digits", measure_steps=MAX_STEPS, seeded=True)
    cb = workload_spec(store.root, "compute_bound", measure_steps=MAX_STEPS, seeded=True)
    script = ScriptSpec(command=script_args(32, 0.05), cwd=str(HERE.parent))
    script_cands = [
        cands.Candidate(
            "batch_x4_sqrt_lr",
            "batch × 4, sqrt lr (edited flags)",
            "--batch-size 128 --lr 0.1 (square-root rule: 0.05 × √4)",
            {"batch": 128, "lr": 0.1},
        ),
        cands.Candidate(
            "batch_x4_linear_lr",
            "batch × 4, linear lr (edited flags)",
            "--batch-size 128 --lr 0.2 (linear rule: 0.05 × 4)",
            {"batch": 128, "lr": 0.2},
        ),
        cands.early_stopping(),
    ]
    return {
        "digits": (digits, templates(), Budget(steps=200), inject, None, "min"),
        "compute_bound": (cb, templates(), Budget(steps=120), inject, None, "min"),
        "script": (script, script_cands, Budget(steps=300), apply_script, METRIC, "max"),
    }


def fmt_arm(a: dict[str, Any]) -> str:
    if a["failed"]:
        return f"FAILED ({a['seeds'] - a['reached']}/{a['seeds']} never)"
    lo, hi = a["spread_s"]
    return f"{a['seconds']:.2f} s [{lo:.2f}–{hi:.2f}] {a['reached']}/{a['seeds']}"


def fmt_ratio(t: dict[str, Any]) -> str:
    if t["ratio"] is None:
        return "—"
    iv = t["interval"]
    hi = "∞" if iv[1] is None else f"{iv[1]:.2f}"
    return f"{t['ratio']:.2f}× [{iv[0]:.2f}, {hi}]"


def injected(store: RunStore, seeds: int, target: float | None) -> None:
    """The script case through the product's own path: ``optimize --to-quality -- python SCRIPT`` with the
    convergence changes injected into the unmodified script at boot (its DataLoader, its optimizer), not edited
    flags; prints the command's own table and, per round, what was injected where (or why not)."""
    import json
    import subprocess

    cmd = [
        sys.executable,
        "-m",
        "advisors",
        "optimize",
        "--to-quality",
        "--budget",
        "300",
        "--seeds",
        str(seeds),
        "--metric",
        METRIC,
        "--goal",
        "max",
        "--json",
        "--store",
        str(store.root),
        *(["--target", str(target)] if target is not None else []),
        "--",
        *script_args(32, 0.05),
    ]
    t0 = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
    if done.returncode != 0:
        print(
            f"## script_injected — FAILED (exit {done.returncode}): {done.stderr.strip()[-800:]}\n"
        )
        return
    out = json.loads(done.stdout)
    t = out["target"]
    print(
        f"## script_injected — target {t['metric']} ≥ {t['value']:.4f} ({t['source']}); budget 300 steps; "
        f"{time.time() - t0:.0f} s of runs; the changes injected at boot into the unmodified script"
    )
    print("\n".join(out["table"]))
    for r in out["rounds"]:
        where = ", ".join(
            f"{k} at {Path(str(v.get('file'))).name}:{v.get('line')}"
            for k, v in ((r.get("applied") or {}).get("sites") or {}).items()
        )
        print(
            f"  - {r['fix']}: {r['rule']} → {r['reason']}"
            + (f" [injected: {where}]" if where else "")
            + (f" [not applied: {r['not_applied']}]" if r.get("not_applied") else "")
        )
    print()
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--only", default="digits,compute_bound,script,script_injected")
    p.add_argument("--store", type=Path)
    p.add_argument(
        "--script-target",
        type=float,
        help="the script's val_acc target (default: from its baseline)",
    )
    args = p.parse_args(argv)
    store = RunStore(args.store or Path(tempfile.mkdtemp(prefix="ttq-bench-")))
    print(
        f"# time to quality · {time.strftime('%Y-%m-%d %H:%M')} · {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} · OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')} · {args.seeds} seeds per arm · store {store.root}"
    )
    print(
        "time to target = MLPerf mean (fastest and slowest seed dropped) [fastest–slowest seed that reached] "
        "reached/seeds; ratio = before / after (> 1: sooner) [95 % bootstrap over seeds]\n"
    )
    for name in args.only.split(","):
        if name == "script_injected":
            injected(store, args.seeds, args.script_target)
            continue
        if name.startswith("noise_"):
            from benchmarks.time_to_quality_noise import run as noise_run

            noise_run(name, store, args.seeds)
            continue
        spec, cand_list, budget, apply, metric, goal = cases(store)[name]
        t0 = time.time()
        given = args.script_target if name == "script" else None
        workload = name != "script"
        ladder = to_quality(
            spec,
            cand_list,
            store_curve_runner(store, budget, metric),
            budget,
            args.seeds,
            goal,
            given,
            metric,
            apply=apply,  # type: ignore[arg-type]
            resolve=script_resolve if workload else None,
            applied=script_applied if workload else None,
            on_progress=lambda s: print(f"  … {s}", file=sys.stderr, flush=True),
        )
        out = quality_json(ladder, metric)
        t = out["target"]
        print(
            f"## {name} — target {t['metric']} {'≤' if t['goal'] == 'min' else '≥'} {t['value']:.4f} "
            f"({t['source']}{', ' + t['note'] if t['note'] else ''}); budget {budget.describe()}; {time.time() - t0:.0f} s of runs"
        )
        print(f"baseline: {fmt_arm(out['baseline']['time_to_target'])}")
        print(f"{'change':44} {'after: time to target':30} {'ratio [interval]':24} verdict")
        for r in out["rounds"]:
            if r["time_to_target"]:
                tt = r["time_to_target"]
                print(
                    f"{r['title']:44} {fmt_arm(tt['after']):30} {fmt_ratio(tt):24} "
                    f"{'KEPT' if r['kept'] else 'rejected'}"
                )
            elif r["early_stopping"]:
                es = r["early_stopping"]
                print(
                    f"{r['title']:44} saves {es['saved_s']:.2f} s ({es['saved_share']:.0%}), gives up "
                    f"{es['metric_given_up']:.4f} ({es['metric_given_up_share']:.1%} of the gain)"
                    f"{'':4} {'KEPT' if r['kept'] else 'rejected'}"
                )
        for r in out["rounds"]:
            print(f"  - {r['fix']}: {r['rule']} → {r['reason']}")
        print()
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
