"""What watching costs: ``python benchmarks/watch_overhead.py [--widths 256 1024] [--repeats 5] [--steps 300]``.

Two measurements, written to ``benchmarks/results/watch-overhead-<date>.{json,md}``:

1. **The agent's own cost per step**, in this process: :meth:`stepwise_agent.watch.WatchRecorder.on_step` (the
   row, memory read, trigger, buffered write) called ``--calls`` times on a steady clock, median of 5 rounds, in
   microseconds and as a share of a 10 ms step.
2. **Whole runs, bare vs watched**, interleaved (bare, watched, watched, bare, … per repeat, per width): the same
   steady script (``benchmarks/scripts/watch_steps.py``) times its own steps either way; a run's figure is the
   median of its steps after the first 10; the overhead is the median over repeats of watched ÷ bare − 1 of the
   runs paired in the same repeat, with the smallest and largest such ratio as its spread. Both arms get the
   same ``OMP_NUM_THREADS=1`` and ``OMP_WAIT_POLICY=PASSIVE`` (the runner's default) so only watching differs.
3. **CPU time, bare vs watched**, from the same runs: a wall-time ratio on this machine wanders by ±15% run to run,
   which hides 1%; CPU time does not wander with the other programs' load. The script's process time per steady
   step (every thread: the agent's recording and its writer thread) watched minus bare, as a share of the bare
   step's wall time — what watching takes from the training process; and the runner's own CPU time (``stepwise
   watch`` and what it starts, less the script: telemetry, the job's output, the analyst) per second over the run's
   second half (past its start-up), sampled every 0.25 s — what it takes from the machine's other cores.
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
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCRIPT = ROOT / "benchmarks" / "scripts" / "watch_steps.py"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}


def agent_cost_us(calls: int) -> list[tuple[float, float, float]]:
    """µs inside ``on_step`` of the watch recorder per step — the median call, and the mean (the rare call that waits for the writer, and
    whatever preemption a busy machine adds) — and the CPU µs per step of the agent's other threads (the step
    log's writer: the process's CPU time less this thread's), five rounds; each simulated step lasts 1 ms (a busy
    wait), captures refused."""
    from stepwise_agent.trigger import RateLimit
    from stepwise_agent.watch import WatchRecorder

    rounds = []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            # no capture (a busy machine's jitter can fire a rule): only the recording and the rules are timed
            rec = WatchRecorder(Path(tmp), limit_mb=100_000.0, rate=RateLimit(per_hour=0))
            rec.data_ms = lambda: 0.1
            rec.start()
            inside = []
            cpu0, own0 = time.process_time(), time.thread_time()
            for _ in range(calls):
                until = time.perf_counter() + 1e-3
                while time.perf_counter() < until:
                    pass
                t = time.perf_counter()
                rec.on_step(1.0, 64)
                inside.append((time.perf_counter() - t) * 1e6)
            rec.stop()  # the writer's last flush counts too
            others = (time.process_time() - cpu0) - (time.thread_time() - own0)
            rounds.append(
                (statistics.median(inside), statistics.mean(inside), max(others, 0.0) * 1e6 / calls)
            )
    return rounds


def _others_cpu_s(root: psutil.Process, seen: dict[int, float]) -> float:
    """CPU seconds so far of ``root`` and its descendants, less the training script's process: each process's
    latest reading is kept in ``seen`` (by pid), so one that has ended still counts."""
    for proc in [root, *root.children(recursive=True)]:
        try:
            cmdline = proc.cmdline()
            if (
                cmdline[1:2] == [str(SCRIPT)] or "stepwise_agent.boot" in cmdline
            ):  # the training process itself
                continue
            times = proc.cpu_times()
            seen[proc.pid] = max(seen.get(proc.pid, 0.0), times.user + times.system)
        except psutil.Error:
            pass
    return sum(seen.values())


def one_run(width: int, steps: int, watched: bool, store: Path) -> dict[str, float]:
    """A run's median step (ms), its process's CPU time per steady step (ms), and the CPU time of everything else
    it started (the runner, for a watched run) per second, over the run's second half (past the runner's start-up)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "walls.json"
        script = [
            sys.executable,
            str(SCRIPT),
            "--width",
            str(width),
            "--steps",
            str(steps),
            "--out",
            str(out),
        ]
        command = (
            [sys.executable, "-m", "stepwise", "watch", "--store", str(store), "--", *script]
            if watched
            else script
        )
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT
        )
        root, samples, seen = psutil.Process(proc.pid), [], {}
        while proc.poll() is None:
            if not out.exists():  # the script has not finished its steps
                samples.append(
                    (time.perf_counter() - t0, _others_cpu_s(root, seen) if watched else 0.0)
                )
            time.sleep(0.25)
        if proc.returncode != 0:
            raise RuntimeError(f"{command} exited {proc.returncode}")
        got = json.loads(out.read_text())
    half = [x for x in samples if x[0] >= samples[-1][0] / 2] if samples else []
    rate = (
        (half[-1][1] - half[0][1]) / (half[-1][0] - half[0][0])
        if len(half) >= 2 and half[-1][0] > half[0][0]
        else 0.0
    )
    return {
        "step_ms": statistics.median(got["walls"][10:]),
        "cpu_ms_per_step": got["cpu_ms_per_step"],
        "others_cores": rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--widths", type=int, nargs="+", default=[256, 768])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--calls", type=int, default=3_000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--agent-only", action="store_true", help="measure the agent's cost alone (no runs)"
    )
    parser.add_argument(
        "--tag", default="", help="added to the results' file names (a second run the same day)"
    )
    args = parser.parse_args()
    cost = agent_cost_us(args.calls)
    medians, means, writer = [c[0] for c in cost], [c[1] for c in cost], [c[2] for c in cost]
    said = (
        f"Agent's own cost per step: median call **{statistics.median(medians):.1f} µs** (rounds "
        f"{', '.join(f'{c:.1f}' for c in medians)}), mean **{statistics.median(means):.1f} µs** (flushes and "
        f"preemption included; rounds {', '.join(f'{c:.1f}' for c in means)}) = "
        f"{statistics.median(means) / 100:.2f}% of a 10 ms step; 5 rounds of {args.calls} calls. The step log's "
        f"writer thread: **{statistics.median(writer):.1f} µs** of CPU a step (rounds "
        f"{', '.join(f'{c:.1f}' for c in writer)}) = {statistics.median(writer) / 100:.2f}% of a 10 ms step; "
        f"together {(statistics.median(means) + statistics.median(writer)) / 100:.2f}%."
    )
    print(said)
    runs: dict[int, dict[str, list[float]]] = {w: {"bare": [], "watched": []} for w in args.widths}
    cpu: dict[int, dict[str, list[float]]] = {w: {"bare": [], "watched": []} for w in args.widths}
    others: dict[int, dict[str, list[float]]] = {
        w: {"bare": [], "watched": []} for w in args.widths
    }
    with tempfile.TemporaryDirectory() as store:
        for r in range(0 if args.agent_only else args.repeats):
            for w in args.widths:
                order = (False, True) if r % 2 == 0 else (True, False)
                for watched in order:
                    got = one_run(w, args.steps, watched, Path(store))
                    arm = "watched" if watched else "bare"
                    runs[w][arm].append(got["step_ms"])
                    cpu[w][arm].append(got["cpu_ms_per_step"])
                    others[w][arm].append(got["others_cores"])
                    print(
                        f"repeat {r + 1} width {w} {arm:7}: {got['step_ms']:.3f} ms/step, "
                        f"{got['cpu_ms_per_step']:.3f} CPU ms/step, runner {got['others_cores']:.3f} cores",
                        flush=True,
                    )
    rows = []
    for w, arms in ({} if args.agent_only else runs).items():
        ratios = [b / a - 1.0 for a, b in zip(arms["bare"], arms["watched"])]
        # the training process's extra CPU per step, as a share of the bare step's wall time, pair by pair
        extra = [
            (cw - cb) / sb for cb, cw, sb in zip(cpu[w]["bare"], cpu[w]["watched"], arms["bare"])
        ]
        rows.append(
            {
                "width": w,
                "bare_ms": arms["bare"],
                "watched_ms": arms["watched"],
                "bare_cpu_ms": cpu[w]["bare"],
                "watched_cpu_ms": cpu[w]["watched"],
                "cpu_extra_median": statistics.median(extra),
                "cpu_extra_min": min(extra),
                "cpu_extra_max": max(extra),
                "runner_cores_median": statistics.median(others[w]["watched"]),
                "runner_cores": others[w]["watched"],
                "bare_median_ms": statistics.median(arms["bare"]),
                "watched_median_ms": statistics.median(arms["watched"]),
                "overhead_median": statistics.median(ratios),
                "overhead_min": min(ratios),
                "overhead_max": max(ratios),
            }
        )
    stamp = dt.date.today().isoformat()
    doc = {
        "date": stamp,
        "cpu_count": os.cpu_count(),
        "steps": args.steps,
        "repeats": args.repeats,
        "agent_us_median_call": medians,
        "agent_us_mean": means,
        "writer_cpu_us_per_step": writer,
        "runs": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stamp += ("-agent" if args.agent_only else "") + (f"-{args.tag}" if args.tag else "")
    (args.out / f"watch-overhead-{stamp}.json").write_text(json.dumps(doc, indent=2))
    lines = [
        f"# Watch overhead, {stamp} ({os.cpu_count()} cores, {args.repeats} interleaved repeats, "
        f"{args.steps} steps a run)",
        "",
        said,
        "",
        "| width | bare ms/step (median) | watched ms/step (median) | overhead median | min | max |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['width']} | {r['bare_median_ms']:.3f} | {r['watched_median_ms']:.3f} | "
        f"{r['overhead_median']:+.2%} | {r['overhead_min']:+.2%} | {r['overhead_max']:+.2%} |"
        for r in rows
    ]
    lines += [
        "",
        "CPU time (the training process's every thread, per steady step; the runner's per second of run):",
        "",
        "| width | bare CPU ms/step | watched CPU ms/step | extra, of the bare step's wall time: median | "
        "min | max | runner's CPU, cores (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['width']} | {statistics.median(r['bare_cpu_ms']):.3f} | {statistics.median(r['watched_cpu_ms']):.3f}"
        f" | {r['cpu_extra_median']:+.2%} | {r['cpu_extra_min']:+.2%} | {r['cpu_extra_max']:+.2%} | "
        f"{r['runner_cores_median']:.3f} |"
        for r in rows
    ]
    (args.out / f"watch-overhead-{stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
