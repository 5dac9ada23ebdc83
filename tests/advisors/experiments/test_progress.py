"""The typed :class:`Progress` an experiment and the ladder report (issue 13.4)."""

from __future__ import annotations

from advisors.experiments.experiment import Policy, run_experiment
from advisors.experiments.progress import Progress
from advisors.experiments.trials import RunOutcome
from advisors.fixes import FIXES
from advisors.stats import Trial
from tests.advisors.fake_script import BASE, apply, knob


def _run(spec, on_progress=None) -> RunOutcome:
    if on_progress is not None:
        on_progress({"step": 4, "total_steps": 8})
    walls = tuple((50.0 if knob(spec, "num_workers") else 100.0) + i % 3 for i in range(6))
    return RunOutcome("ok", Trial(walls, 16.0), 300.0, (2.0, 1.5, 1.2), 8)


def test_an_experiment_reports_typed_progress() -> None:
    seen: list[Progress] = []
    run_experiment(
        BASE,
        FIXES["dataloader_workers"],
        _run,
        Policy(trials=2, n_boot=50),
        on_progress=seen.append,
        apply=apply,
    )
    assert all(isinstance(p, Progress) for p in seen)
    assert [(p.arm, p.trial) for p in seen if p.step is None] == [
        ("baseline", 1),
        ("patched", 1),
        ("patched", 2),
        ("baseline", 2),
    ]
    last = seen[-1]
    assert last.describe == "baseline run 2 of 2 · step 4 of 8" and last.fraction == 0.875
    assert last.tagged(2, "amp").describe.startswith("round 2 · fix amp · ")


def test_progress_round_trips_and_tolerates_damage() -> None:
    p = Progress(
        "trial", round=1, fix="amp", arm="patched", trial=2, trials=3, step=5, total_steps=10
    )
    assert Progress.from_dict(p.to_dict()) == p
    assert Progress.from_dict(None) == Progress()
    assert Progress.from_dict({"phase": "exploding", "trial": "x"}) == Progress()
    assert Progress().describe == "starting…" and Progress().fraction == 0.0


def test_the_ladder_names_its_fix_by_title_in_its_progress() -> None:
    """The dashboard walk read "round 1 · fix dataloader_workers · patched run 2 of 2": the fix's id. The
    progress line names it as the rest of the page does, by its title."""
    from advisors.experiments.optimize import optimize
    from tests.advisors.experiments.test_experiment import (
        FAST,
        FakeRunner,
        FakeStrategy,
        _fake_diagnose,
    )

    seen: list[Progress] = []
    fake = FakeRunner()
    optimize(
        BASE,
        fake,
        rounds=1,
        policy=FAST,
        diagnose_run=_fake_diagnose(fake),
        on_progress=seen.append,
        strategy=FakeStrategy(),
    )
    tagged = [p for p in seen if p.fix]
    assert tagged and {p.fix for p in tagged} <= {f.title for f in FIXES.values()}
    assert tagged[0].describe == f"round 1 · fix {FIXES['dataloader_workers'].title}"


def test_an_extra_pair_is_not_run_4_of_3() -> None:
    """Issue 42: progress read "patched run 4 of 3" when pairs that disagreed got more pairs."""
    extra = Progress("trial", arm="patched", trial=4, trials=3)
    assert (
        extra.describe
        == "pair 4 (extra: the pairs disagreed or other programs competed) · patched run"
    )
    assert Progress("trial", arm="baseline", trial=3, trials=3).describe == "baseline run 3 of 3"


def test_the_bar_is_not_full_while_extra_pairs_run() -> None:
    """Pairs 4 and 5 of a planned 3 ran under a full bar: past the planned pairs, the bar counts the most the
    experiment may run, and it is never full while a run is still going."""
    last_planned = Progress(
        "trial", arm="baseline", trial=3, trials=3, step=8, total_steps=8, max_trials=5
    )
    extra = Progress("trial", arm="patched", trial=4, trials=3, step=0, total_steps=8, max_trials=5)
    assert last_planned.fraction < 1.0 and extra.fraction == 0.6
    assert extra.describe.startswith("pair 4 of at most 5 (extra: ")
    fifth = Progress(
        "trial", arm="baseline", trial=5, trials=3, step=8, total_steps=8, max_trials=5
    )
    assert extra.fraction < fifth.fraction < 1.0
