"""A/B experiments and the optimize loop with a fake runner: fake timings, no thresholds on real time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pytest

from advisors.diagnosis import diagnose
from advisors.experiments.experiment import Policy, run_experiment
from advisors.fixes import FIXES
from advisors.verdict import Diagnosis
from advisors.experiments.optimize import optimize
from advisors.experiments.script_strategy import ScriptStrategy
from advisors.stats import Trial, throughput_ratio
from advisors.synthetic import observation, run_facts
from advisors.experiments.trials import RunOutcome, measured_trial
from profilers.errors import SpecError
from profilers.run.script_spec import ScriptSpec
from tests.advisors.fake_script import BASE, apply, knob

FAST = Policy(trials=3, n_boot=400)


class FakeStrategy(ScriptStrategy):
    """The script strategy with the fake's ``apply`` (no recorded config: loop fixes set the fake's own flags)."""

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(BASE, device)

    def candidates(self, d: Diagnosis, spec: ScriptSpec, rejected: set[str]) -> Any:
        from advisors.experiments.optimize import proposed
        from advisors.fixes import applies

        return (
            FIXES[f]
            for f in proposed(d)
            if f not in rejected
            and applies(FIXES[f], "cpu", 1) is None
            and apply(spec, FIXES[f]) != spec
        )

    def apply(self, spec: ScriptSpec, fix: Any) -> ScriptSpec:
        return apply(spec, fix)

    def learn(self, outcome: RunOutcome) -> None:
        return None

    def proof(self, fix: Any) -> Any:
        return None


def run(spec: ScriptSpec, fix: Any, runner: Any, policy: Policy = FAST) -> Any:
    return run_experiment(spec, fix, runner, policy, apply=apply)


@dataclass
class FakeRunner:
    """Step time from the spec: 100 ms, 20 ms with cache_decoded, 98 ms with workers (no real gain)."""

    oom_without_accum: bool = False
    loss_penalty: dict[str, float] = field(default_factory=dict)
    calls: list[ScriptSpec] = field(default_factory=list)
    specs: dict[str, ScriptSpec] = field(default_factory=dict)

    def __call__(self, spec: ScriptSpec, on_progress: Any = None) -> RunOutcome:
        self.calls.append(spec)
        run_dir = f"fake-{len(self.calls)}"
        self.specs[run_dir] = spec
        if on_progress:
            on_progress({"step": 1})
        accum = knob(spec, "grad_accum_steps", 1)
        if self.oom_without_accum and spec.memory_budget_mb and accum == 1:
            return RunOutcome(
                "out_of_memory", None, 1900.0, (2.3, 2.2), 2, "RSS passed the budget", run_dir
            )
        ms = 20.0 if knob(spec, "cache_decoded") else 98.0 if knob(spec, "num_workers") else 100.0
        ms *= 1.05 if accum > 1 else 1.0
        rng = np.random.default_rng(len(self.calls))
        walls = tuple(float(w) for w in ms * (1 + 0.01 * rng.standard_normal(15)))
        loss = 1.0 + sum(v for k, v in self.loss_penalty.items() if knob(spec, k))
        losses = tuple(np.linspace(2.3, loss, spec.measure_steps))
        return RunOutcome("ok", Trial(walls, 32), 700.0, losses, spec.measure_steps, None, run_dir)


def test_clear_gain_is_kept_and_trials_interleave() -> None:
    fake = FakeRunner()
    exp = run(BASE, FIXES["cache_decoded"], fake)
    assert exp.kept and exp.speedup is not None and 4.5 < exp.speedup < 5.5
    assert exp.ratio and exp.ratio.low > 1 + FAST.min_gain
    assert [bool(knob(s, "cache_decoded")) for s in fake.calls] == [
        False,
        True,
        True,
        False,
        False,
        True,
    ]  # A B, B A
    assert len(exp.baseline.trials) == len(exp.patched.trials) == 3


def test_the_experiment_names_what_the_fix_changed() -> None:
    exp = run(BASE, FIXES["cache_decoded"], FakeRunner())
    assert exp.spec_changes() == {"cache_decoded": (None, True)}


def test_a_script_needs_its_own_way_to_apply_a_fix(tmp_path) -> None:
    script = ScriptSpec(command=("python", "train.py"), cwd=str(tmp_path))
    runs: list[Any] = []
    with pytest.raises(SpecError, match="apply="):
        run_experiment(
            script,
            FIXES["dataloader_workers"],
            lambda spec, on_progress=None: runs.append(spec),
            FAST,
        )
    assert runs == []  # refused before any run
    with pytest.raises(SpecError, match="strategy"):
        optimize(script, lambda spec, on_progress=None: runs.append(spec), rounds=1, policy=FAST)


def test_no_real_gain_is_rejected_with_numbers() -> None:
    exp = run(BASE, FIXES["dataloader_workers"], FakeRunner())
    assert not exp.kept and "no real gain" in exp.reason and "interval" in exp.reason
    assert exp.speedup is not None and 1.0 < exp.speedup < 1.05


def test_faster_but_worse_loss_is_rejected() -> None:
    exp = run(BASE, FIXES["cache_decoded"], FakeRunner(loss_penalty={"cache_decoded": 0.5}))
    assert not exp.kept and "loss does not hold" in exp.reason and exp.loss_delta is not None


def test_out_of_memory_baseline_uses_a_reference_and_keeps_the_fix() -> None:
    fake = FakeRunner(oom_without_accum=True)
    spec = BASE.patch(memory_budget_mb=900)
    exp = run(spec, FIXES["grad_accumulation"], fake)
    assert exp.kept and exp.reason.startswith(
        "turns out_of_memory into ok within the 900 MB budget"
    )
    assert (
        len(exp.baseline.outcomes) == 1
        and exp.reference is not None
        and len(exp.reference.trials) == 3
    )
    assert exp.reference.spec.memory_budget_mb is None
    assert (
        exp.speedup is not None and exp.speedup < 1.0
    )  # the cost per sample, measured against the reference


def test_failing_patch_stops_early() -> None:
    fake = FakeRunner(oom_without_accum=True)
    spec = BASE.patch(memory_budget_mb=900)
    exp = run(spec, FIXES["cache_decoded"], fake)
    assert not exp.kept and "out_of_memory" in exp.reason and len(exp.patched.outcomes) == 1


def _fake_diagnose(fake: FakeRunner):
    def diag(outcome: RunOutcome) -> Diagnosis:
        spec = fake.specs[outcome.run_dir or ""]
        if outcome.status == "out_of_memory":
            return diagnose(
                observation(
                    no_trace=True,
                    run=run_facts("out_of_memory", memory_budget_mb=spec.memory_budget_mb),
                )
            )
        loader = 0.02 if knob(spec, "cache_decoded") else 0.6
        workers = knob(spec, "num_workers")
        ops = (
            {"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": loader}
            if not workers
            else {}
        )
        return diagnose(
            observation(
                {"dataloader": loader, "forward": 0.3}, device="cpu", ops=ops, run=run_facts()
            )
        )

    return diag


def test_optimize_builds_a_ladder_with_rejected_and_kept_rungs() -> None:
    fake = FakeRunner()
    ladder = optimize(
        BASE,
        fake,
        rounds=3,
        policy=FAST,
        diagnose_run=_fake_diagnose(fake),
        strategy=FakeStrategy(),
    )
    fixes = [(r.experiment.fix.id, r.experiment.kept) for r in ladder.rungs]
    assert fixes[:2] == [("dataloader_workers", False), ("cache_decoded", True)]
    assert knob(ladder.final, "cache_decoded") and not knob(ladder.final, "num_workers")
    assert 4.5 < ladder.total_speedup < 5.5
    assert ladder.last_diagnosis is not None and ladder.last_diagnosis.bottleneck.value == "none"
    # each rung carries the diagnosis' bound: loader 60% of the step at stake, so at most 2.5x
    assert [r.upper_bound for r in ladder.rungs[:2]] == [pytest.approx(2.5), pytest.approx(2.5)]


def test_a_fix_an_earlier_experiment_rejected_on_this_baseline_is_not_re_tried_in_round_one() -> (
    None
):
    """The walk: an Apply rejected DataLoader workers (0.98×) minutes before the ladder re-tried them. Given what
    that Apply measured, round 1 goes straight to the next fix and the ladder says why it skipped one."""
    from advisors.experiments.results.ladder_report import ladder_json, ladder_table

    fake = FakeRunner()
    why = "the Apply at 10:42 measured it on this run: rejected: no real gain: 0.98×"
    ladder = optimize(
        BASE,
        fake,
        rounds=3,
        policy=FAST,
        diagnose_run=_fake_diagnose(fake),
        measured_before={"dataloader_workers": why},
        strategy=FakeStrategy(),
    )
    assert [r.experiment.fix.id for r in ladder.rungs][:1] == ["cache_decoded"]
    assert not any(
        knob(c, "num_workers") for c in fake.calls
    )  # no trial spent on the workers again
    assert [(a.fix.id, a.why) for a in ladder.not_retried] == [("dataloader_workers", why)]
    assert ladder_json(ladder)["not_retried"] == [
        {"fix": "dataloader_workers", "fix_title": FIXES["dataloader_workers"].title, "why": why}
    ]
    assert f"not re-tried (dataloader_workers): {why}" in ladder_table(ladder)


def test_optimize_turns_out_of_memory_into_ok() -> None:
    fake = FakeRunner(oom_without_accum=True)
    ladder = optimize(
        BASE.patch(memory_budget_mb=900),
        fake,
        rounds=1,
        policy=FAST,
        diagnose_run=_fake_diagnose(fake),
        strategy=FakeStrategy(),
    )
    assert (
        ladder.rungs[0].experiment.fix.id == "grad_accumulation" and ladder.rungs[0].experiment.kept
    )
    assert knob(ladder.final, "grad_accum_steps") == 2


def test_candidates_skip_what_cannot_act_here() -> None:
    d = diagnose(
        observation(
            {"gpu_compute": 0.07, "forward": 0.4},
            kernels_per_step=60,
            median_kernel_us=4,
            step_ms=4.4,
        )
    )  # 69 µs of GPU idle per launch: launch-bound
    on_cpu = [f.id for f in ScriptStrategy(BASE, "cpu").candidates(d, BASE, set())]
    assert "cuda_graphs" not in on_cpu  # CUDA only
    # a loop fix is a candidate only through the script's own flag (none recorded here): advice instead
    assert "larger_batch" not in on_cpu and "larger_batch" in [
        f.id for f, _ in ScriptStrategy(BASE).advice(d)
    ]
    on_gpu = [f.id for f in ScriptStrategy(BASE, "cuda").candidates(d, BASE, set())]
    assert on_gpu[0] == "cuda_graphs"  # injected: torch.compile(mode="reduce-overhead")


def test_ratio_interval_brackets_no_change() -> None:
    rng = np.random.default_rng(1)
    arms = [[Trial(tuple(100 + rng.standard_normal(20)), 32.0) for _ in range(3)] for _ in range(2)]
    r = throughput_ratio(arms[0], arms[1], n_boot=500)
    assert r.low <= 1.0 <= r.high and r.low < r.point < r.high
    assert throughput_ratio(arms[0], arms[1], n_boot=500) == r  # seeded: reproducible


def test_measured_trial_skips_warmup_and_profiled_steps() -> None:
    rows = [
        {
            "rank": k,
            "step": i,
            "wall_ms": 1000.0 if i < 2 else 500.0 if i in (2, 3) else 10.0 + k,
            "samples": 8,
            "profiled": i in (2, 3),
        }
        for i in range(8)
        for k in (0, 1)
    ]
    t = measured_trial(pd.DataFrame(rows), warmup_steps=2)
    assert t is not None and t.walls_ms == (11.0,) * 4 and t.samples_per_step == 16


@pytest.mark.slow
def test_optimize_cli_json_contract(monkeypatch, tmp_path, capsys) -> None:
    import functools
    import json

    from cli import optimize as cli_optimize
    from cli.advisors import main

    from advisors.experiments import trials

    fake = FakeRunner()
    monkeypatch.setattr(
        trials, "script_runner", lambda store, timeout_s=None, experiment=None: fake
    )
    monkeypatch.setattr(
        cli_optimize, "optimize", functools.partial(optimize, diagnose_run=_fake_diagnose(fake))
    )
    spec_file = tmp_path / "spec.json"  # a workload's settings (a stored run's spec.json is one)
    spec_file.write_text(json.dumps({"workload": "data_bound", "batch_size": 32, "steps": 20}))
    assert (
        main(
            [
                "optimize",
                str(spec_file),
                "--rounds",
                "2",
                "--json",
                "--store",
                str(tmp_path / "runs"),
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["total_speedup"] > 4 and out["final_spec_changes"] == {"cache_decoded": True}
    assert out["rounds"][1]["applied"] is None  # the fake left no injected.json to read
    rows = out["rounds"]
    assert [r["kept"] for r in rows[:2]] == [False, True]
    for r in rows:
        assert {
            "round",
            "bottleneck",
            "fix",
            "before",
            "after",
            "speedup",
            "kept",
            "loss_delta",
            "interval",
            "reason",
            "cumulative_speedup",
        } <= set(r)
        assert len(r["before"]["raw_step_ms"]) == 3 and r["after"]["samples_per_s"] > 0
    assert rows[1]["spec_patch"] == {"cache_decoded": True}  # what the patched arm changed
    assert out[
        "experiment_id"
    ]  # the ladder is stored as one experiment (tests/cli/test_optimize_stored.py)


def test_memory_fix_on_a_running_baseline_is_kept_for_headroom() -> None:
    @dataclass
    class PeakRunner(FakeRunner):
        def __call__(self, spec: ScriptSpec, on_progress: Any = None) -> RunOutcome:
            out = super().__call__(spec, on_progress)
            return RunOutcome(
                out.status,
                out.trial,
                1000.0 / knob(spec, "grad_accum_steps", 1),
                out.losses,
                out.steps_done,
                None,
                out.run_dir,
            )

    exp = run(BASE, FIXES["grad_accumulation"], PeakRunner())  # 5% slower, half the peak
    assert exp.kept and exp.reason.startswith("kept for memory headroom: peak 1000 -> 500 MB")
    slower = run(
        BASE,
        FIXES["grad_accumulation"],
        PeakRunner(),
        Policy(trials=3, n_boot=400, max_memory_cost=0.01),
    )
    assert not slower.kept and "no real gain" in slower.reason


@dataclass
class DriftingRunner(FakeRunner):
    """The machine halves its speed after ``slow_after`` runs: every step takes twice as long from then on."""

    slow_after: int = 7

    def __call__(self, spec: ScriptSpec, on_progress: Any = None) -> RunOutcome:
        out = super().__call__(spec, on_progress)
        if len(self.calls) <= self.slow_after or out.trial is None:
            return out
        return RunOutcome(
            out.status,
            Trial(tuple(2 * w for w in out.trial.walls_ms), out.trial.samples_per_step),
            out.peak_memory_mb,
            out.losses,
            out.steps_done,
            out.error,
            out.run_dir,
        )


def test_a_ladder_says_when_a_baseline_moved_between_attempts() -> None:
    """Issue 42: round 2's "before" was twice round 1's "after" for the same code. Here round 1's second attempt
    times the same baseline at half the first attempt's rate: optimize --json and the table say so."""
    from advisors.experiments.results.ladder_report import ladder_json, ladder_table

    fake = DriftingRunner()
    ladder = optimize(
        BASE,
        fake,
        rounds=3,
        policy=FAST,
        diagnose_run=_fake_diagnose(fake),
        strategy=FakeStrategy(),
    )
    assert [r.experiment.fix.id for r in ladder.rungs][:2] == [
        "dataloader_workers",
        "cache_decoded",
    ]
    rounds = ladder_json(ladder)["rounds"]
    assert rounds[0]["baseline_moved"] is None and rounds[0]["baseline_drift"] is None
    assert rounds[1]["baseline_drift"] == pytest.approx(0.5, rel=0.05)
    said = rounds[1]["baseline_moved"]
    assert (
        said.startswith("baseline moved: round 1's baseline ran")
        and "round 1's previous attempt's baseline" in said
    )
    assert f"    ! {said}" in ladder_table(ladder)


class NoBatchRunner(FakeRunner):
    """Trials whose script reports no batch: their rates count steps."""

    def __call__(self, spec, on_progress=None):  # type: ignore[no-untyped-def]
        out = super().__call__(spec, on_progress)
        if out.trial is None:
            return out
        return RunOutcome(
            out.status,
            Trial(out.trial.walls_ms, 1.0),
            out.peak_memory_mb,
            out.losses,
            out.steps_done,
            out.error,
            out.run_dir,
            per_step=True,
        )


def test_ladder_rows_keep_their_columns_apart_and_say_a_rate_in_steps() -> None:
    """A row read "494.70.98x (steps/s)": the unit ran into the after/s column, beside a legend of samples/s."""
    from advisors.experiments.results.ladder_report import STEPS_MARK, ladder_table

    fake = NoBatchRunner()
    ladder = optimize(
        BASE,
        fake,
        rounds=1,
        policy=FAST,
        diagnose_run=_fake_diagnose(fake),
        strategy=FakeStrategy(),
    )
    lines = ladder_table(ladder)
    row = next(line for line in lines if line.startswith("+ "))
    after, speedup = row[55:].split()[1:3]  # before/s, after/s, speed-up: fields apart
    assert float(after) > 0 and speedup.endswith("x" + STEPS_MARK), row
    assert any(line.startswith(f"{STEPS_MARK}: no batch was seen") for line in lines)


def test_a_memory_fix_round_says_each_arms_peaks_beside_its_step_time() -> None:
    from advisors.experiments.results.ladder_report import ladder_json, ladder_table

    fake = FakeRunner(oom_without_accum=True)
    ladder = optimize(
        BASE.patch(memory_budget_mb=900),
        fake,
        rounds=1,
        policy=FAST,
        diagnose_run=_fake_diagnose(fake),
        strategy=FakeStrategy(),
    )
    (r,) = ladder_json(ladder)["rounds"]
    e = ladder.rungs[0].experiment
    memory = r["memory"]
    assert memory["before_peak_memory_mb"] == round(e.before.peak_memory_mb, 1)
    assert memory["after_peak_memory_mb"] == round(e.patched.peak_memory_mb, 1)
    assert memory["before_peak_allocated_mb"] is None  # the fake runs wrote no trace
    line = next(s for s in ladder_table(ladder) if s.startswith("    memory: "))
    assert f"run peak {e.before.peak_memory_mb:.0f} → {e.patched.peak_memory_mb:.0f} MB" in line
    assert line.endswith(
        f"step {r['before']['step_time_ms']:.1f} → {r['after']['step_time_ms']:.1f} ms "
        f"({r['after']['step_time_ms'] / r['before']['step_time_ms'] - 1:+.0%})"
    )
