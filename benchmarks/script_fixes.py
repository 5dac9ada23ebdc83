"""``optimize`` on unmodified training scripts, on this machine, ladders side by side.

    .venv/bin/python benchmarks/script_fixes.py [--scripts photos,mlp] [--rounds 3] [--trials 3] [--steps 15]
                                                [--json bench-out/script_fixes.json]

Each script in ``benchmarks/scripts/`` is optimised exactly as a user would: ``python -m advisors optimize
--json -- python benchmarks/scripts/<name>_train.py`` in a subprocess, with its runs kept in a run store
(``--store``, default a fresh temporary folder) so every number traces to its run folder. The scripts are
never edited; each kept fix is printed with the line it changes.

Targets (per-sample throughput, A/B with interleaved trials, product of the kept fixes): the data-bound
script >= 2.0x (aim >= 2.8x), the compute-bound script >= 1.5x.
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
SCRIPTS = {"photos": ("photos_train.py", "data-bound: storage latency + JPEG decode + random crop", 2.0),
           "mlp": ("mlp_train.py", "compute-bound: wide fp32 MLP, CPU saturated", 1.5)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scripts", default=",".join(SCRIPTS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--steps", type=int, default=15, help="timed steps per trial")
    p.add_argument("--store", type=Path)
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


def run_one(name: str, args: argparse.Namespace, store: Path) -> dict[str, Any]:
    script = HERE / "scripts" / SCRIPTS[name][0]
    cmd = [sys.executable, "-m", "advisors", "optimize", "--json", "--store", str(store), "--rounds",
           str(args.rounds), "--trials", str(args.trials), "--steps", str(args.steps), "--", "python", str(script)]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-2000:], "seconds": time.monotonic() - started}
    out = json.loads(proc.stdout)
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    store = args.store or Path(tempfile.mkdtemp(prefix="stepwise-script-bench-"))
    print(f"# script_fixes on {platform.node()} · {os.cpu_count()} cores · {platform.processor() or platform.machine()}"
          f" · python {platform.python_version()} · {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"# rounds {args.rounds}, trials {args.trials}, {args.steps} timed steps per trial; store {store}")
    results: dict[str, Any] = {}
    for name in args.scripts.split(","):
        results[name] = res = run_one(name, args, store)
        print(f"\n## {name} ({SCRIPTS[name][1]}) — {res.get('seconds', 0):.0f} s")
        if "error" in res:
            print("error: " + res["error"])
            continue
        print("\n".join(res["table"]))
        for r in res["rounds"]:
            if r["kept"] and r.get("change"):
                print(f"\n{r['fix']} at {r['where'] or 'start-up'}:\n{r['change']['text']}")
        for a in res.get("advice", []):
            print(f"advice: {a['fix']}: {a['why']}")
    print("\n## side by side")
    print(f"{'script':<10}{'kept fixes':<48}{'total':>8}{'target':>8}  met")
    for name, res in results.items():
        target = SCRIPTS[name][2]
        if "error" in res:
            print(f"{name:<10}{'error':<48}{'-':>8}{target:>7.1f}x  no")
            continue
        kept = " + ".join(f"{r['fix']} {r['speedup']:.2f}x" for r in res["rounds"] if r["kept"]) or "none"
        total = res["total_speedup"]
        print(f"{name:<10}{kept:<48}{total:>7.2f}x{target:>7.1f}x  {'yes' if total >= target else 'NO'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
