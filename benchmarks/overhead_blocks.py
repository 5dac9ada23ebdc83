"""Within-run A/B of the instrumentation that stays on outside the profiler's window.

    .venv/bin/python benchmarks/overhead_blocks.py [--workload data_bound] [--size bench] [--blocks 48] [--json]

Why a second measurement beside ``overhead.py``: on a shared VM the same bare run varies ±15–20% from one
process to the next (memory placement, neighbours), more than the 5% being measured, so run-vs-run pairs
cannot resolve it without hundreds of runs. Here one training process alternates blocks of steps with the
worker's steady-state instrumentation ON — the watchdog thread (20 Hz), host/NVML telemetry (10 Hz) and
TensorBoard scalars per step — and OFF (as in a ``STEPWISE_BARE`` run: steps and progress files only), in
ABBA order so a linear drift cancels. Adjacent blocks share the process, its memory layout and nearly the same
moment, so the paired ratio's interval is narrow.

What this does not cover: the profiler's window itself (excluded by definition) and anything it leaves behind
afterwards; ``overhead.py``'s run-vs-run pairs cover those, with their wider interval.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # what the runner gives every worker (before torch loads)

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from advisors.stats import Trial, throughput_ratio  # noqa: E402
from profilers.run import instrument  # noqa: E402
from profilers.telemetry.sampler import TelemetrySampler  # noqa: E402
from profilers.run.trainer import StepRecord, Trainer  # noqa: E402
from profilers.run.trainer_record import RunRecorder  # noqa: E402
from sample_runs import get_workload  # noqa: E402

CALIBRATION_STEPS = 5
BLOCK_SECONDS = 1.5
ABBA = ("on", "off", "off", "on")
PARTS = frozenset({"watchdog", "telemetry", "tensorboard"})


class BlockHooks:
    """Switches the steady-state instrumentation on and off between blocks; keeps each block's step walls."""

    def __init__(self, run_dir: Path, first_step: int, block_steps: int, total: int,
                 parts: frozenset[str] = PARTS) -> None:
        self.first, self.block_steps, self.parts = first_step, block_steps, parts
        self.recorders = {"on": RunRecorder(_mk(run_dir / "on"), 0, total, tensorboard="tensorboard" in parts,
                                            leader=True),
                          "off": RunRecorder(_mk(run_dir / "off"), 0, total, tensorboard=False, leader=True)}
        self.run_dir = run_dir
        self.arm: str | None = None
        self.dog: instrument.Watchdog | None = None
        self.telemetry: TelemetrySampler | None = None
        self.blocks: list[tuple[str, list[float]]] = []

    def arm_of(self, step: int) -> str:
        return ABBA[((step - self.first) // self.block_steps) % len(ABBA)]

    def before_step(self, step: int) -> None:
        if (step - self.first) % self.block_steps == 0:
            self._switch(self.arm_of(step))
            self.blocks.append((self.arm_of(step), []))
        if self.dog is not None:
            self.dog.step_started(step)

    def after_step(self, record: StepRecord) -> None:
        assert self.arm is not None
        if self.dog is not None:
            self.dog.step_finished()
        self.recorders[self.arm].record(record, profiled=False)
        self.blocks[-1][1].append(record.wall_ms)

    def _switch(self, arm: str) -> None:
        if arm == self.arm:
            return
        self.stop()
        if arm == "on" and "watchdog" in self.parts:  # what worker._start_watch starts without a budget
            self.dog = instrument.Watchdog(None, None, on_oom=lambda mb: None, on_timeout=lambda s: None)
            self.dog.start()
        if arm == "on" and "telemetry" in self.parts:
            self.telemetry = TelemetrySampler(self.run_dir / "telemetry.jsonl", interval_s=0.1)
            self.telemetry.start()
        self.arm = arm

    def stop(self) -> None:
        for thread in (self.dog, self.telemetry):
            if thread is not None:
                thread.stop()
        self.dog = self.telemetry = None

    def close(self) -> None:
        self.stop()
        for rec in self.recorders.values():
            rec.close()


class _Walls:
    """Hooks that only keep wall times (warm-up and calibration steps)."""

    def __init__(self) -> None:
        self.walls: list[float] = []

    def before_step(self, step: int) -> None:
        pass

    def after_step(self, record: StepRecord) -> None:
        self.walls.append(record.wall_ms)


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def measure(workload: str, size: str, blocks: int, parts: frozenset[str] = PARTS) -> dict:
    spec = get_workload(workload).spec(size)
    trainer = Trainer.build(spec.patch(steps=10**6))
    warm = _Walls()
    trainer.total_steps = spec.warmup_steps + CALIBRATION_STEPS
    trainer.run(warm)
    step_ms = statistics.median(warm.walls[spec.warmup_steps:])
    block_steps = max(3, round(BLOCK_SECONDS * 1000 / step_ms))
    first = trainer.steps_done
    trainer.total_steps = first + blocks * block_steps
    with tempfile.TemporaryDirectory(prefix="stepwise-overhead-blocks-") as tmp:
        hooks = BlockHooks(Path(tmp), first, block_steps, trainer.total_steps, parts)
        try:
            trainer.run(hooks)
        finally:
            hooks.close()
        tel = Path(tmp) / "telemetry.jsonl"
        samples = sum(1 for _ in open(tel, encoding="utf-8")) if tel.exists() else 0
    per_sample = spec.batch_size * spec.grad_accum_steps
    trials = {"on": [], "off": []}
    for arm, walls in hooks.blocks:
        trials[arm].append(Trial(tuple(walls), per_sample))
    est = throughput_ratio(trials["off"], trials["on"])
    return {"workload": workload, "size": size, "parts": sorted(parts), "block_steps": block_steps, "blocks": len(hooks.blocks),
            "step_ms": step_ms, "telemetry_samples": samples,
            "on_seconds": round(sum(sum(walls) for arm, walls in hooks.blocks if arm == "on") / 1000, 3),
            "on_samples_per_s": [round(t.throughput, 1) for t in trials["on"]],
            "off_samples_per_s": [round(t.throughput, 1) for t in trials["off"]],
            "ratio": est.point, "low": est.low, "high": est.high, "level": est.level}


def report(r: dict, target: float = 0.95) -> bool:
    print(f"\n{r['workload']} ({r['size']}, ON = {'+'.join(r['parts'])}): {r['blocks']} blocks of {r['block_steps']} steps "
          f"(~{r['step_ms']:.0f} ms/step), order ABBA, {r['telemetry_samples']} telemetry samples in the ON blocks")
    print("  ON  samples/s: " + " ".join(f"{v:.0f}" for v in r["on_samples_per_s"]))
    print("  OFF samples/s: " + " ".join(f"{v:.0f}" for v in r["off_samples_per_s"]))
    ok = r["ratio"] >= target
    resolved = r["low"] >= target or r["high"] < target
    print(f"  instrumented/bare throughput: {r['ratio']:.3f}, {r['level']:.0%} interval [{r['low']:.3f}, "
          f"{r['high']:.3f}]; target ≥ {target:.2f}: {'met' if ok else 'NOT met'}"
          + ("" if resolved else " — not resolved (interval straddles the target)"))
    return ok and resolved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", action="append", help="workload name (repeatable); default compute_bound, data_bound")
    ap.add_argument("--size", default="bench")
    ap.add_argument("--blocks", type=int, default=48, help="blocks in all (a multiple of 4 keeps ABBA whole)")
    ap.add_argument("--parts", default=",".join(sorted(PARTS)),
                    help="what ON switches on, comma-separated (to find which part costs): " + ", ".join(sorted(PARTS)))
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of text")
    args = ap.parse_args()
    parts = frozenset(p.strip() for p in args.parts.split(",") if p.strip())
    if not parts <= PARTS:
        ap.error(f"unknown part(s) {sorted(parts - PARTS)}; known: {sorted(PARTS)}")
    results = [measure(w, args.size, args.blocks, parts) for w in args.workload or ["compute_bound", "data_bound"]]
    if args.json:
        print(json.dumps(results))
        return 0
    return 0 if all([report(r) for r in results]) else 1


if __name__ == "__main__":
    sys.exit(main())
