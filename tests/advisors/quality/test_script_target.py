"""The script's own metric target as early stopping's target (issue 43 item 4): read from what the agent recorded
of the script's configuration (argparse flags, globals, Hydra values) or a Lightning ``EarlyStopping(
stopping_threshold=…)`` in its source, used when ``--target`` is not given, and said with where it came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisors.experiments.to_quality import QualityRun, QualitySpec, to_quality
from advisors.experiments.to_quality_report import quality_json
from advisors.quality import candidates as cands
from advisors.quality.script_target import (
    ScriptTarget,
    from_config,
    from_source,
    is_target_name,
    of_runs,
)
from advisors.quality.target import Budget, Target
from tests.advisors.quality.test_fair_arms import BASE, curve


def option(flag: str, value: Any, dest: str | None = None) -> dict[str, Any]:
    """One argparse option as the agent records it (stepwise_agent/inject/config.py)."""
    return {
        "flags": [flag],
        "dest": dest or flag.lstrip("-").replace("-", "_"),
        "default": value,
        "value": value,
        "action": "store",
        "type": type(value).__name__,
    }


def parsers(*options: dict[str, Any]) -> dict[str, Any]:
    return {"parsers": [{"class": "ArgumentParser", "options": list(options)}]}


def test_an_argparse_target_flag_is_read_with_its_goal_and_where() -> None:
    config = parsers(
        option("--lr", 0.1),
        option("--early_stopping_patience", 5),
        option("--target_modules", "q,v"),
        option("--target_loss", 0.55),
    )
    assert from_config(config) == ScriptTarget(0.55, "min", "the script's --target_loss")
    assert from_config(config).said == "target 0.55 from the script's --target_loss"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "name",
    [
        "--early_stop_loss",
        "--target",
        "--target_acc",
        "--val_loss_target",
        "stopping_threshold",
        "train.target_loss",
        "--stop_loss",
    ],
)
def test_target_names(name: str) -> None:
    assert is_target_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "--early_stopping_patience",
        "--early_stopping_threshold",
        "--target_steps",
        "--stop_after",
        "--min_delta",
        "--seed",
        "--target_dir",
        "--lr",
    ],
)
def test_names_that_are_not_targets(name: str) -> None:
    assert not is_target_name(name)


def test_globals_hydra_values_and_hf_goal() -> None:
    assert from_config({"globals": {"target_acc": 0.9}}) == ScriptTarget(
        0.9, "max", "the script's target_acc = …"
    )
    hydra = {"hydra": {"values": {"train.lr": 0.1, "train.target_loss": 1.2}}}
    assert from_config(hydra) == ScriptTarget(1.2, "min", "the script's config train.target_loss")
    hf = parsers(
        option("--greater_is_better", True), option("--target", 0.8)
    )  # no metric word: HF's goal
    assert from_config(hf) == ScriptTarget(0.8, "max", "the script's --target")
    assert from_config(parsers(option("--target_loss", "low"), option("--done", True))) is None


def test_a_lightning_early_stopping_threshold_in_the_source(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import lightning as L\nfrom lightning.pytorch.callbacks import EarlyStopping\n"
        "stop = EarlyStopping(monitor='val_acc', mode='max', patience=3, stopping_threshold=0.92)\n"
        "trainer = L.Trainer(callbacks=[stop])\n"
    )
    assert from_source(script) == ScriptTarget(
        0.92, "max", "the script's EarlyStopping(stopping_threshold=…) at train.py:3"
    )
    script.write_text(
        "from lightning.pytorch.callbacks import EarlyStopping\nEarlyStopping(monitor='val_loss')\n"
    )
    assert from_source(script) is None
    run = tmp_path / "run"
    run.mkdir()
    script.write_text("cb = EarlyStopping(monitor='val_loss', stopping_threshold=0.3)\n")
    (run / "injected.json").write_text(
        json.dumps({"config": {"parsers": [], "script": str(script)}})
    )
    assert of_runs([None, str(run)]) == ScriptTarget(
        0.3, "min", "the script's EarlyStopping(stopping_threshold=…) at train.py:1"
    )


def runner(tmp_path: Path, config: dict[str, Any]):
    """Recorded falling curves; each run folder holds the agent's record of the script's configuration."""
    count = [0]

    def run(spec: QualitySpec, stop_at: Target | None) -> QualityRun:
        count[0] += 1
        run_dir = tmp_path / f"run{count[0]}"
        run_dir.mkdir(parents=True)
        (run_dir / "injected.json").write_text(json.dumps({"config": config}))
        return QualityRun("ok", curve(0.1, jitter=0.001 * (spec.seed or 0)), str(run_dir))

    return run


def test_the_scripts_own_target_decides_early_stopping_and_says_where_it_came_from(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    config = parsers(option("--target_loss", 0.8))
    ladder = to_quality(
        BASE,
        [cands.early_stopping()],
        runner(tmp_path, config),
        Budget(steps=60),
        seeds=3,
        on_progress=said.append,
    )
    [rnd] = ladder.rounds
    es = rnd.early_stopping
    assert es is not None and es.target == 0.8 and es.target_from == "the script's --target_loss"
    assert (
        rnd.outcome == "kept"
        and "target 0.8 from the script's --target_loss; kept: stopping at the first point "
        "that reaches the target 0.8"
        in rnd.reason
    )
    assert "early stopping: target 0.8 from the script's --target_loss" in said
    assert (
        quality_json(ladder)["rounds"][0]["early_stopping"]["target_from"]
        == "the script's --target_loss"
    )


def test_a_given_target_wins_and_a_target_of_the_other_goal_is_not_used(tmp_path: Path) -> None:
    config = parsers(option("--target_loss", 0.8))
    given = to_quality(
        BASE,
        [cands.early_stopping()],
        runner(tmp_path / "a", config),
        Budget(steps=60),
        seeds=3,
        target_value=0.5,
    )
    es = given.rounds[0].early_stopping
    assert (
        es is not None
        and es.target == 0.5
        and es.target_from == "--target"
        and "script" not in given.rounds[0].reason
    )
    said: list[str] = []
    other = to_quality(
        BASE,
        [cands.early_stopping()],
        runner(tmp_path / "b", parsers(option("--target_acc", 0.9))),
        Budget(steps=60),
        seeds=3,
        on_progress=said.append,
    )
    es = other.rounds[0].early_stopping
    assert (
        es is not None
        and es.target is None
        and es.target_from is None
        and "from the script" not in es.reason
    )
    assert any("target 0.9 from the script's --target_acc is not used" in s for s in said)


@pytest.mark.slow
def test_a_users_script_target_flag_is_read_from_its_real_run(tmp_path: Path) -> None:
    """Through the launcher and the agent: the flag the script parsed (``--target_loss 0.7`` on its command line)
    is the one found, its patience flag is not."""
    import sys

    from advisors.experiments.to_quality import arm_spec, store_curve_runner
    from profilers.store.runs import RunStore
    from profilers.run.script_spec import ScriptSpec

    script = Path(__file__).resolve().parents[2] / "scripts" / "target_loss_train.py"
    spec = ScriptSpec(command=(sys.executable, str(script), "--target_loss", "0.7"))
    budget = Budget(steps=10)
    got = store_curve_runner(RunStore(tmp_path), budget)(arm_spec(spec, budget, 0), None)
    assert got.ok, got.error
    assert of_runs([got.run_dir]) == ScriptTarget(0.7, "min", "the script's --target_loss")
