"""``optimize`` on unmodified training scripts, on this machine, ladders side by side.

    .venv/bin/python benchmarks/script_fixes.py [--scripts photos,mlp,trainer,lightning,flags,flags-injected]
                                                [--rounds 3] [--trials 3]
                                                [--steps 15] [--python ENV/bin/python]
                                                [--json bench-out/script_fixes.json]

Each script in ``benchmarks/scripts/`` is optimised exactly as a user would: ``python -m advisors optimize
--json -- python benchmarks/scripts/<name>_train.py`` in a subprocess, with its runs kept in a run store
(``--store``, default a fresh temporary folder) so every number traces to its run folder. The scripts are
never edited; each kept fix is printed with the line it changes.

Targets (per-sample throughput, A/B with interleaved trials, product of the kept fixes): the data-bound
script >= 2.0x (aim >= 2.8x), the compute-bound script >= 1.5x. The framework scripts (a Hugging Face
``Trainer`` and a Lightning script) have no target: they show each fix where their users make it
(``TrainingArguments(...)``, ``L.Trainer(...)``, the ``DataLoader(...)`` in ``train_dataloader()``), and their
ladders are printed side by side. They run with ``--python`` (the interpreter of an environment that has
transformers and lightning; default this one). The flag-configured script (``flags``) is optimised twice with
the same fixes asked for: once as a user gets it (each fix that has a flag is measured by running the command
with that flag) and once with every fix injected (``flags-injected``, ``optimize --inject``); the two ladders are
printed side by side and must agree within noise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPTS: dict[str, tuple[str, str, float | None]] = {
    "photos": ("photos_train.py", "data-bound: storage latency + JPEG decode + random crop", 2.0),
    "mlp": ("mlp_train.py", "compute-bound: wide fp32 MLP, CPU saturated", 1.5),
    "trainer": (
        "hf_trainer_train.py",
        "Hugging Face Trainer: GPT-2 (2 layers, 128 wide) from a config",
        None,
    ),
    "lightning": (
        "lightning_train.py",
        "Lightning: MLP, train_dataloader() with 2 ms storage latency",
        None,
    ),
    "flags": (
        "flags_train.py",
        "configured by flags: --amp (its bf16 autocast), --workers (its DataLoader's)",
        None,
    ),
    "flags-injected": (
        "flags_train.py",
        "the same script, every fix injected (optimize --inject)",
        None,
    ),
}
FRAMEWORKS = ("trainer", "lightning")
#: the flag-configured script, by its flags and injected: the same fixes asked for in both, their ladders side by side
BY_FLAG = ("flags", "flags-injected")
FLAG_FIXES = ("bf16_autocast", "dataloader_workers")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scripts", default=",".join(SCRIPTS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--steps", type=int, default=15, help="timed steps per trial")
    p.add_argument("--store", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--python", default=sys.executable, help="interpreter for the framework scripts")
    p.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="FIX_ID",
        help="fixes to try on the framework scripts (optimize --fix), instead of the diagnosis' choice",
    )
    return p.parse_args(argv)


def run_one(name: str, args: argparse.Namespace, store: Path) -> dict[str, Any]:
    script = HERE / "scripts" / SCRIPTS[name][0]
    fixes = args.fix if name in FRAMEWORKS else FLAG_FIXES if name in BY_FLAG else []
    cmd = [
        sys.executable,
        "-m",
        "advisors",
        "optimize",
        "--json",
        "--store",
        str(store),
        "--rounds",
        str(args.rounds),
        "--trials",
        str(args.trials),
        "--steps",
        str(args.steps),
        *(["--inject"] if name == "flags-injected" else []),
        *(a for f in fixes for a in ("--fix", f)),
        "--",
        args.python if name in FRAMEWORKS else "python",
        str(script),
    ]
    started = time.monotonic()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRAINER_OUT": str(store / "trainer-out")}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-2000:], "seconds": time.monotonic() - started}
    out = json.loads(proc.stdout)
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def framework_ladders(results: dict[str, dict[str, Any]]) -> list[str]:
    """The framework scripts' ladders side by side: one row per fix tried in any, a column per script with the
    measured ratio [interval] and the verdict, and the line each was shown at."""
    names = list(results)
    fixes = list(dict.fromkeys(r["fix"] for res in results.values() for r in res["rounds"]))
    width = 40
    lines = [
        "## framework ladders side by side",
        f"{'fix':<22}" + "".join(f"{n:<{width}}" for n in names),
    ]
    for fix in fixes:
        cells = []
        for n in names:
            r = next((x for x in results[n]["rounds"] if x["fix"] == fix), None)
            if r is None:
                cells.append("not tried")
            elif r["not_applied"]:
                cells.append("not applied")
            else:
                low, high = r["interval"] or (None, None)
                ratio = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
                band = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
                cells.append(f"{ratio}{band} {'kept' if r['kept'] else 'rejected'}")
        lines.append(f"{fix:<22}" + "".join(f"{c:<{width}}" for c in cells))
    lines.append(
        f"{'total':<22}"
        + "".join(f"{results[n]['total_speedup']:.2f}x".ljust(width) for n in names)
    )
    for fix in fixes:
        for n in names:
            r = next((x for x in results[n]["rounds"] if x["fix"] == fix), None)
            if r is not None and r.get("change") and r["change"]["kind"] == "diff":
                changed = [
                    ln[1:].strip()
                    for ln in r["change"]["text"].splitlines()
                    if ln.startswith("+") and not ln.startswith("+++")
                ]
                lines.append(
                    f"{fix} in {n}: {Path(r['where'].rsplit(':', 1)[0]).name}:{r['where'].rsplit(':', 1)[1]}"
                    f" -> {' | '.join(changed)}"
                )
    return lines


def flag_vs_injected(flag: dict[str, Any], injected: dict[str, Any]) -> list[str]:
    """Each fix measured through the script's own flag beside the same fix injected: ratio [interval] of each,
    and whether they agree (their 95% intervals overlap). A workers flag sets ``num_workers`` only; the injected
    fix also keeps its workers alive and prefetches 4 batches each."""
    lines = [
        "## by its flag vs injected (the same fix, the same script)",
        f"{'fix':<22}{'by flag':<44}{'injected':<40}agree",
    ]

    def cell(r: dict[str, Any] | None) -> tuple[str, tuple[float, float] | None]:
        if r is None:
            return "not tried", None
        if r["not_applied"]:
            return f"not applied: {r['not_applied']}"[:40], None
        low, high = r["interval"] or (None, None)
        band = (low, high) if low is not None and high is not None else None
        text = f"{r['speedup']:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if band else "")
        return f"{text} {'kept' if r['kept'] else 'rejected'}", band

    for fix in dict.fromkeys(r["fix"] for r in flag["rounds"] + injected["rounds"]):
        a = next((r for r in flag["rounds"] if r["fix"] == fix), None)
        b = next((r for r in injected["rounds"] if r["fix"] == fix), None)
        (ta, ia), (tb, ib) = cell(a), cell(b)
        agree = (
            "-"
            if ia is None or ib is None
            else "yes"
            if ia[0] <= ib[1] and ib[0] <= ia[1]
            else "NO"
        )
        lines.append(f"{fix:<22}{ta:<44}{tb:<40}{agree}")
        for label, r in (("by flag", a), ("injected", b)):
            if r is not None and r.get("change"):
                shown = [
                    x
                    for x in r["change"]["text"].splitlines()
                    if x.startswith("+") and not x.startswith("+++")
                ]
                lines.append(f"    {label}: {' | '.join(x[1:].strip() for x in shown)[:150]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    store = args.store or Path(tempfile.mkdtemp(prefix="stepwise-script-bench-"))
    print(
        f"# script_fixes on {platform.node()} · {os.cpu_count()} cores · {platform.processor() or platform.machine()}"
        f" · python {platform.python_version()} · {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        f"# rounds {args.rounds}, trials {args.trials}, {args.steps} timed steps per trial; store {store}"
    )
    if args.fix:
        print(
            f"# framework scripts: fixes asked for ({', '.join(args.fix)}); interpreter {args.python}"
        )
    results: dict[str, Any] = {}
    for name in args.scripts.split(","):
        results[name] = res = run_one(name, args, store)
        print(f"\n## {name} ({SCRIPTS[name][1]}) — {res.get('seconds', 0):.0f} s")
        if "error" in res:
            print("error: " + res["error"])
            continue
        print("\n".join(res["table"]))
        for r in res["rounds"]:
            if r.get("change") and (r["kept"] or name in FRAMEWORKS):
                verdict = "kept" if r["kept"] else "measured, not kept"
                print(
                    f"\n{r['fix']} ({verdict}) at {r['where'] or 'start-up'}:\n{r['change']['text']}"
                )
        for a in res.get("advice", []):
            print(f"advice: {a['fix']}: {a['why']}")
    print("\n## side by side")
    print(f"{'script':<10}{'kept fixes':<48}{'total':>8}{'target':>8}  met")
    for name, res in results.items():
        target = SCRIPTS[name][2]
        shown = f"{target:>7.1f}x" if target is not None else f"{'-':>8}"
        if "error" in res:
            print(f"{name:<10}{'error':<48}{'-':>8}{shown}  no")
            continue
        kept = (
            " + ".join(f"{r['fix']} {r['speedup']:.2f}x" for r in res["rounds"] if r["kept"])
            or "none"
        )
        total = res["total_speedup"]
        met = "-" if target is None else "yes" if total >= target else "NO"
        print(f"{name:<10}{kept:<48}{total:>7.2f}x{shown}  {met}")
    frameworks = [n for n in FRAMEWORKS if n in results and "error" not in results[n]]
    if frameworks:
        print("\n" + "\n".join(framework_ladders({n: results[n] for n in frameworks})))
    by_flag = [n for n in BY_FLAG if n in results and "error" not in results[n]]
    if len(by_flag) == 2:
        print("\n" + "\n".join(flag_vs_injected(results[by_flag[0]], results[by_flag[1]])))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
