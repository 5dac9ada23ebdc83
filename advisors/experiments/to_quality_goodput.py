"""The noise-scale plan of ``optimize --to-quality``: read the baseline's gradient noise scale, probe the step time
at each batch factor, and choose the batch-scaling candidates from the prediction
(:mod:`advisors.quality.goodput`), before any of them runs.

The noise scale comes from the meter every to-quality arm carries (``noise_scale.jsonl``,
:mod:`stepwise_agent.noise_scale`: built into a sample workload's trainer, injected at boot into a script). The
throughput probe is a short run per batch factor k ∈ {1, 2, 4, 8} (after :data:`PROBE_WARMUP` untimed steps,
enough timed steps to span about :data:`PROBE_SECONDS` at the baseline's own step time — at least
:data:`PROBE_STEPS`, at most :data:`MAX_PROBE_STEPS`; not a run to the target): its median step time. Twelve steps
of a sub-millisecond script were 10 ms of work, below the telemetry's 10 Hz and inside one scheduler slice of a
busy machine: its ratios were noise (benchmarks/results/quality-load-2026-11-27.md). A workload's batch is its
spec's; a script's is the training DataLoader's ``batch_size`` its baseline run recorded (``injected.json``),
scaled in the probe by the same ``batch_scale`` knob the candidate will inject. A factor that does not run (out
of memory, too few samples for the batch) has no step time and no prediction.

**Under load.** A prediction is the steps ratio (from B_simple: read off the baseline's gradients, the same on a
busy machine) × the step-time ratio t(k)/t(1) (the probe's: wall time, which other programs stretch). Probed one
factor after another, a burst of another program during one factor's probe moved that factor's step time and
nothing else — the part that moved with load. So each factor is probed **paired** with a probe at × 1 just
before it (the two see the same stretch of the machine), its ratio read within the pair, and each probe's
other-programs load recorded as an A/B trial's is (:func:`~advisors.experiments.trial_load.trial_load`); a pair
with one contended probe is probed again, once (the A/B rule's :data:`~advisors.compare.contention.
CONTENDED_CORES`). ``step_ms[1]`` is the median of the × 1 probes and ``step_ms[k]`` = that × the pair's ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, Union

import numpy as np

from advisors.experiments.to_quality import PlanFn, QualityRun, QualitySpec
from advisors.quality import candidates as cands
from advisors.quality.goodput import KS, GoodputPlan, plan
from advisors.quality.noise_scale import estimate, read_rows
from profilers.store.runs import RunStore
from stepwise_agent.noise_scale import ENV as NOISE_ENV

PROBE_WARMUP, PROBE_STEPS, MAX_PROBE_STEPS = 3, 12, 4000
PROBE_SECONDS = (
    2.0  # a probe's timed steps span about this long: 20 telemetry samples, many scheduler slices
)


@dataclass(frozen=True)
class ProbeTime:
    """One probe: its median step time (``None``: it did not run) and other programs' mean cores meanwhile."""

    step_ms: float | None
    others_cores: float | None = None

    @property
    def contended(self) -> bool:
        from advisors.quality.fair import contended

        return contended(self.others_cores)


#: step time (ms) of ``spec`` at batch factor k over ``steps`` timed steps (a bare number: no load recorded), or
#: ``None`` when it did not run
ProbeFn = Callable[[QualitySpec, int, int], Union[ProbeTime, float, None]]


def probe_steps(base_step_ms: float | None, k: int) -> int:
    """Timed steps for a probe at × k: about :data:`PROBE_SECONDS` at the baseline's step time × k."""
    if not base_step_ms or base_step_ms <= 0:
        return PROBE_STEPS
    return int(min(MAX_PROBE_STEPS, max(PROBE_STEPS, PROBE_SECONDS * 1000 / (base_step_ms * k))))


def _timed(got: ProbeTime | float | None) -> ProbeTime:
    return got if isinstance(got, ProbeTime) else ProbeTime(got)


def store_probe(store: RunStore, experiment: str | None = None) -> ProbeFn:
    """The real :data:`ProbeFn`: a short run in ``store`` (with the meter, as the arms have it)."""
    from profilers.run.handle import follow

    def probe(spec: QualitySpec, k: int, steps: int = PROBE_STEPS) -> ProbeTime:
        from dataclasses import replace

        from profilers.run.launch import start_script

        inject = {"batch_scale": k} if k > 1 else {}
        s2 = replace(
            spec,
            seed=0,
            warmup_steps=PROBE_WARMUP,
            measure_steps=steps,
            profile_steps=1,
            inject=inject,
        )
        from advisors.experiments.trial_load import trial_load

        handle = start_script(
            s2, store, label=f"ttq-probe-x{k}", parent=experiment, extra_env={NOISE_ENV: "1"}
        )
        result = follow(handle, None, None)
        ok = result.status.value == "ok" and result.step_time_ms
        load = trial_load(
            store.read_telemetry(handle.run_id), store.read_steps(handle.run_id), PROBE_WARMUP + 1
        )
        return ProbeTime(
            result.step_time_ms if ok else None, load.others_cores if load is not None else None
        )

    return probe


def batch_of(spec: QualitySpec, runs: Sequence[QualityRun]) -> int | None:
    from advisors.quality.script_candidates import read_baseline

    base = read_baseline(runs)
    return base.batch if base is not None else None


def planner(
    probe: ProbeFn,
    budget_steps: int | None = None,
    ks: Sequence[int] = KS,
    on_progress: Callable[[str], None] | None = None,
) -> PlanFn:
    """The :data:`PlanFn` of ``optimize --to-quality`` (see the module docs)."""
    say = on_progress or (lambda _: None)

    def make(spec: QualitySpec, base_runs: Sequence[QualityRun]) -> GoodputPlan | None:
        batch = batch_of(spec, base_runs)
        rows = read_rows(r.run_dir for r in base_runs)
        if batch is None or not rows:
            why = (
                "the baseline's runs left no noise-scale rows"
                if not rows
                else "the script's batch size was not seen (no DataLoader(batch_size=…))"
            )
            return GoodputPlan(
                None, {}, None, (), f"no noise scale: {why}; batch scaling stays as given"
            )
        noise = estimate(rows, batch)
        below = noise is not None and noise.b_simple is not None and batch < noise.b_simple
        # above the critical batch nothing is probed: no k can pay
        base_ms = [r.median_step_ms for r in base_runs if r.median_step_ms]
        step_ms, pairs = paired_step_times(
            spec, probe, ks if below else (), say, float(np.median(base_ms)) if base_ms else None
        )
        p = plan(batch, noise.b_simple if noise else None, step_ms, ks)
        chosen = tuple(_candidate(spec, k, budget_steps) for k in p.chosen)
        return GoodputPlan(noise, step_ms, p, chosen, probe_pairs=pairs)

    return make


def paired_step_times(
    spec: QualitySpec,
    probe: ProbeFn,
    ks: Sequence[int],
    say: Callable[[str], None],
    base_step_ms: float | None = None,
) -> tuple[dict[int, float | None], dict[int, dict[str, float | None | int]]]:
    """Each k's step time read within a pair (× 1, then × k; see the module docs), with each pair's record; each
    probe long enough to span :data:`PROBE_SECONDS` at ``base_step_ms`` (the baseline's)."""
    pairs: dict[int, tuple[ProbeTime, ProbeTime, int]] = {}
    for k in ks:
        for attempt in (0, 1):
            say(
                f"throughput probe: batch × 1 then × {k}"
                + (" (again: other programs were busy)" if attempt else "")
            )
            one, at_k = (
                _timed(probe(spec, 1, probe_steps(base_step_ms, 1))),
                _timed(probe(spec, k, probe_steps(base_step_ms, k))),
            )
            if attempt == 0 and one.contended != at_k.contended:
                continue
            break
        pairs[k] = (one, at_k, attempt)
    ones = [p[0].step_ms for p in pairs.values() if p[0].step_ms]
    if not ones:
        return ({1: None} if ks else {}), {}
    t1 = float(np.median(ones))
    step_ms: dict[int, float | None] = {1: t1}
    record: dict[int, dict[str, float | None | int]] = {}
    for k, (one, at_k, again) in pairs.items():
        step_ms[k] = t1 * at_k.step_ms / one.step_ms if at_k.step_ms and one.step_ms else None
        record[k] = {
            "step_ms_x1": one.step_ms,
            "step_ms": at_k.step_ms,
            "others_cores_x1": one.others_cores,
            "others_cores": at_k.others_cores,
            "probed_again": again,
        }
    return step_ms, record


def _candidate(spec: QualitySpec, k: int, budget_steps: int | None) -> cands.Candidate:
    from advisors.quality.script_candidates import templates

    return templates(k)[0]  # made concrete from the baseline's optimizer and DataLoader by resolve
