"""The noise-scale plan of ``optimize --to-quality``: read the baseline's gradient noise scale, probe the step time
at each batch factor, and choose the batch-scaling candidates from the prediction
(:mod:`advisors.quality.goodput`), before any of them runs.

The noise scale comes from the meter every to-quality arm carries (``noise_scale.jsonl``,
:mod:`stepwise_agent.noise_scale`: built into a sample workload's trainer, injected at boot into a script). The
throughput probe is a short run per batch factor k ∈ {1, 2, 4, 8} (:data:`PROBE_STEPS` steps after
:data:`PROBE_WARMUP` untimed ones; not a run to the target): its median step time. A workload's batch is its
spec's; a script's is the training DataLoader's ``batch_size`` its baseline run recorded (``injected.json``),
scaled in the probe by the same ``batch_scale`` knob the candidate will inject. A factor that does not run (out
of memory, too few samples for the batch) has no step time and no prediction.
"""

from __future__ import annotations

from typing import Callable, Sequence

from advisors.experiments.to_quality import PlanFn, QualityRun, QualitySpec
from advisors.quality import candidates as cands
from advisors.quality.goodput import KS, GoodputPlan, plan
from advisors.quality.noise_scale import estimate, read_rows
from profilers.store.runs import RunStore
from stepwise_agent.noise_scale import ENV as NOISE_ENV

PROBE_WARMUP, PROBE_STEPS = 3, 12
#: step time (ms) of ``spec`` at batch factor k, or ``None`` when it did not run
ProbeFn = Callable[[QualitySpec, int], "float | None"]


def store_probe(store: RunStore, experiment: str | None = None) -> ProbeFn:
    """The real :data:`ProbeFn`: a short run in ``store`` (with the meter, as the arms have it)."""
    from profilers.run.handle import follow

    def probe(spec: QualitySpec, k: int) -> float | None:
        from dataclasses import replace

        from profilers.run.launch import start_script

        inject = {"batch_scale": k} if k > 1 else {}
        s2 = replace(spec, seed=0, warmup_steps=PROBE_WARMUP, measure_steps=PROBE_STEPS, profile_steps=1,
                     inject=inject)
        handle = start_script(s2, store, label=f"ttq-probe-x{k}", parent=experiment, extra_env={NOISE_ENV: "1"})
        result = follow(handle, None, None)
        return result.step_time_ms if result.status.value == "ok" and result.step_time_ms else None

    return probe


def batch_of(spec: QualitySpec, runs: Sequence[QualityRun]) -> int | None:
    from advisors.quality.script_candidates import read_baseline

    base = read_baseline(runs)
    return base.batch if base is not None else None


def planner(probe: ProbeFn, budget_steps: int | None = None, ks: Sequence[int] = KS,
            on_progress: Callable[[str], None] | None = None) -> PlanFn:
    """The :data:`PlanFn` of ``optimize --to-quality`` (see the module docs)."""
    say = on_progress or (lambda _: None)

    def make(spec: QualitySpec, base_runs: Sequence[QualityRun]) -> GoodputPlan | None:
        batch = batch_of(spec, base_runs)
        rows = read_rows(r.run_dir for r in base_runs)
        if batch is None or not rows:
            why = "the baseline's runs left no noise-scale rows" if not rows else \
                "the script's batch size was not seen (no DataLoader(batch_size=…))"
            return GoodputPlan(None, {}, None, (), f"no noise scale: {why}; batch scaling stays as given")
        noise = estimate(rows, batch)
        step_ms: dict[int, float | None] = {}
        below = noise is not None and noise.b_simple is not None and batch < noise.b_simple
        for k in (1, *ks) if below else ():  # above the critical batch nothing is probed: no k can pay
            say(f"throughput probe: batch × {k}")
            step_ms[k] = probe(spec, k)
        p = plan(batch, noise.b_simple if noise else None, step_ms, ks)
        chosen = tuple(_candidate(spec, k, budget_steps) for k in p.chosen)
        return GoodputPlan(noise, step_ms, p, chosen)

    return make


def _candidate(spec: QualitySpec, k: int, budget_steps: int | None) -> cands.Candidate:
    from advisors.quality.script_candidates import templates

    return templates(k)[0]  # made concrete from the baseline's optimizer and DataLoader by resolve
