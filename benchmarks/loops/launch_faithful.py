"""The user's program as they run it: each held-in script bare, and under ``launch`` with the profiler off.

``python benchmarks/loops/launch_faithful.py [--repeats 6] [--steps 120] [--skip 20]`` writes
``benchmarks/results/launch-faithful-<date>-<tag>.{json,md}``. Both arms run the same script through
``benchmarks/loops/step_clock.py``, which times every optimizer step and ends the script after ``--steps``;
under ``launch`` the agent's warm-up is longer than the script, so the profiler never starts and every step is
an ordinary timed step of the agent. A run's time per step is the elapsed time over its steps after ``--skip``
÷ their count; a pair is one bare and one launched run of the same repeat, in alternating order; the figure is
the median over pairs of launched ÷ bare − 1, with the smallest and largest pair beside it. The file says the
machine's load (the 1-minute load average before and after, and the cores other programs used during the
arms, from ``psutil``) and whether the script saw the same thread variables and counts in both arms.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CLOCK = ROOT / "benchmarks" / "loops" / "step_clock.py"
SCRIPTS = {
    "plain_train": [str(ROOT / "tests" / "scripts" / "plain_train.py")],
    "flags_train": [str(ROOT / "tests" / "scripts" / "flags_train.py")],
    "gpt2_reference": [
        str(ROOT / "tests" / "scripts" / "gpt2_reference_train.py"),
        "--input_bin",
        "TOKENS",
    ],
    "tiny_gpt": [str(ROOT / "benchmarks" / "scripts" / "tiny_gpt_train.py"), "--iters", "100000"],
}


def _clock_env(out: Path, steps: int) -> dict[str, str]:
    return {"PLAIN_STEPS": str(steps), "PLAIN_OUT": str(out), "PLAIN_EXIT": "raise"}


def _per_step_ms(out: Path, skip: int) -> tuple[float, dict]:
    seen = json.loads(out.read_text())
    walls = seen["walls_ms"][skip:]
    return sum(walls) / len(walls), seen


def _bare(argv: list[str], out: Path, steps: int, cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWISE_")}
    subprocess.run(
        [sys.executable, str(CLOCK), *argv],
        env={**env, **_clock_env(out, steps)},
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=900,
    )


def _launched(argv: list[str], out: Path, steps: int, cwd: Path, store_root: Path) -> str:
    from profilers.run.handle import follow
    from profilers.run.launch import start_launch
    from profilers.store.runs import RunStore

    handle = start_launch(
        [sys.executable, str(CLOCK), *argv],
        RunStore(store_root),
        steps=1,
        boot={"warmup": 10**6},
        cwd=str(cwd),
        extra_env=_clock_env(out, steps),
    )
    return follow(handle, None, 900).status.value


def _middle_half(pairs: list[float]) -> tuple[float, float]:
    """The first and third quartiles of the pairs' launched ÷ bare − 1."""
    if len(pairs) < 2:
        return (pairs[0] - 1, pairs[0] - 1)
    q = statistics.quantiles(pairs, n=4)
    return (q[0] - 1, q[2] - 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--skip", type=int, default=20)
    ap.add_argument("--scripts", nargs="*", default=list(SCRIPTS))
    ap.add_argument("--tag", default="quiet")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    rows, env_same = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in args.scripts:
            argv = [work / "tokens.bin" if a == "TOKENS" else a for a in SCRIPTS[name]]
            argv = [str(a) for a in argv]
            pairs, others, arm_ms = [], [], []
            for r in range(args.repeats):
                arms = {}
                for arm in ("bare", "launch") if r % 2 == 0 else ("launch", "bare"):
                    out = work / f"{name}-{r}-{arm}.json"
                    psutil.cpu_percent(None)
                    if arm == "bare":
                        _bare(argv, out, args.steps, work)
                    else:
                        status = _launched(argv, out, args.steps, work, work / "runs")
                        assert status == "ok", f"{name}: the launched run ended {status}"
                    others.append(psutil.cpu_percent(None) / 100 * psutil.cpu_count())
                    arms[arm] = _per_step_ms(out, args.skip)
                pairs.append(arms["launch"][0] / arms["bare"][0])
                arm_ms.append({"bare": arms["bare"][0], "launch": arms["launch"][0]})
                env_same[name] = env_same.get(name, True) and all(
                    arms["launch"][1][k] == arms["bare"][1][k]
                    for k in ("threads", "interop", "env")
                )
                print(
                    f"{name} repeat {r + 1}: bare {arms['bare'][0]:.2f} ms/step, launch "
                    f"{arms['launch'][0]:.2f} ms/step, {100 * (pairs[-1] - 1):+.1f}%",
                    flush=True,
                )
            rows[name] = {
                "overhead_median": statistics.median(pairs) - 1,
                "overhead_min": min(pairs) - 1,
                "overhead_max": max(pairs) - 1,
                "middle_half": _middle_half(pairs),
                "pairs": pairs,
                "ms_per_step": arm_ms,
                "busy_cores_median": statistics.median(others),
            }
    load_after = os.getloadavg()[0]
    date = dt.date.today().isoformat()
    result = {
        "date": date,
        "repeats": args.repeats,
        "steps": args.steps,
        "skip": args.skip,
        "load_1min_before": load_before,
        "load_1min_after": load_after,
        "cores": psutil.cpu_count(),
        "same_environment": env_same,
        "scripts": rows,
        "target": "≤ 2% on a quiet machine",
    }
    dest = ROOT / "benchmarks" / "results" / f"launch-faithful-{date}-{args.tag}"
    dest.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# Bare vs under launch (profiler off), {date}",
        "",
        f"{args.repeats} interleaved pairs a script, {args.steps} steps a run, the first {args.skip} "
        f"left out; load average {load_before:.2f} before, {load_after:.2f} after, on {psutil.cpu_count()} "
        "cores (busy cores: all programs, this one's arms included, during each arm).",
        "",
        "| script | launch ÷ bare − 1 (median) | middle half of pairs | smallest | largest "
        "| busy cores | same env and threads |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {100 * row['overhead_median']:+.1f}% | "
            f"{100 * row['middle_half'][0]:+.1f}% … {100 * row['middle_half'][1]:+.1f}% | "
            f"{100 * row['overhead_min']:+.1f}% | "
            f"{100 * row['overhead_max']:+.1f}% | {row['busy_cores_median']:.2f} | "
            f"{'yes' if env_same[name] else 'no'} |"
        )
    dest.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
