"""A sample workload as a run (fast, no training): its settings become the training script's flags and the
launcher's settings, the run is long enough for five steady steps, only registered workloads are run, and an old
run's ``spec.json`` reads back as the same settings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cli.workloads import (
    default_steps,
    parse_sets,
    settings_file,
    settings_of,
    shape,
    workload_of,
    workload_spec,
)
from profilers.errors import SpecError
from profilers.run.agent_path import content_hash
from stepwise_agent.steady import MIN_STEADY


def test_the_run_is_the_workloads_script_in_a_copy_of_its_package(tmp_path: Path) -> None:
    spec = workload_spec(tmp_path, "data_bound", values={"num_workers": 2}, params={"images": 32})
    assert spec.command == (
        "python",
        "-m",
        "sample_runs.train",
        "data_bound",
        "--steps",
        "12",
        "--num-workers",
        "2",
        "--set-param",
        "images=32",
    )
    assert spec.python == sys.executable and workload_of(spec) == "data_bound"
    copy = Path(spec.cwd)
    assert copy.parent == tmp_path / ".code" and (copy / "sample_runs" / "train.py").is_file()
    assert copy.name == content_hash(copy / "sample_runs")  # one copy per content, like the agent's
    assert (spec.warmup_steps, spec.measure_steps, spec.profile_steps) == (3, 5, 3)
    assert spec.nproc_per_node == 1 and spec.memory_budget_mb is None


def test_the_launchers_settings_are_not_flags(tmp_path: Path) -> None:
    memory = workload_spec(tmp_path, "memory_bound")
    assert memory.memory_budget_mb == 1500 and "--memory-budget-mb" not in " ".join(memory.command)
    two = workload_spec(
        tmp_path,
        "communication_bound",
        values={"world_size": 4, "nnodes": 2, "rdzv_endpoint": "h:1", "step_timeout_s": 30.0},
    )
    assert (two.nproc_per_node, two.nnodes, two.rdzv_endpoint, two.step_timeout_s) == (
        2,
        2,
        "h:1",
        30.0,
    )
    lifted = workload_spec(tmp_path, "memory_bound", values={"memory_budget_mb": None})
    assert lifted.memory_budget_mb is None


def test_a_default_run_has_five_steady_steps_and_a_short_one_still_one_timed_step() -> None:
    assert default_steps() == 3 + MIN_STEADY + 1 + 3
    assert shape(12) == (3, 5, 3) and shape(48) == (3, 41, 3)
    assert shape(4) == (1, 1, 1) and shape(3) == (
        0,
        1,
        1,
    )  # profile one step, warm up less: never no timed step


def test_trials_fix_the_timed_steps_and_the_script_outlasts_the_window(tmp_path: Path) -> None:
    spec = workload_spec(tmp_path, "compute_bound", measure_steps=20, seeded=True)
    assert spec.measure_steps == 20 and spec.command[-4:] == ("--steps", "27", "--seed", "0")


@pytest.mark.parametrize(
    "call, words",
    [
        (
            lambda root: workload_spec(root, "nope"),
            "unknown workload 'nope'; known workloads: communication_bound",
        ),
        (
            lambda root: workload_spec(root, "os:system"),
            "unknown workload 'os:system'",
        ),  # a name never imports code
        (lambda root: workload_spec(root, "digits", "huge"), "has no size 'huge'"),
        (
            lambda root: workload_spec(root, "digits", values={"persistent_workers": True}),
            "needs num_workers > 0",
        ),
        (lambda root: workload_spec(root, "digits", params={"widht": 2}), "has no parameter"),
        (lambda root: parse_sets(["bogus=1"]), "unknown setting 'bogus'"),
    ],
)
def test_bad_settings_are_one_sentence(tmp_path: Path, call, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match=words.replace("(", r"\(").replace(")", r"\)")):
        call(tmp_path)


def test_an_old_runs_spec_json_reads_back_as_its_settings(tmp_path: Path) -> None:
    old = json.loads(
        (
            Path(__file__).resolve().parents[1] / "fixtures" / "h100" / "compute_fp32" / "spec.json"
        ).read_text()
    )
    workload, size, values, params = settings_of(old)
    assert (workload, size, params) == ("compute_bound", "gpu", {})
    spec = workload_spec(tmp_path, workload, size, values, params)
    assert spec.command[3:5] == ("compute_bound", "--size") and "gpu" in spec.command
    (tmp_path / "s.yaml").write_text("workload: digits\nnum_workers: 2\nparams: {size: bench}\n")
    assert settings_file(tmp_path / "s.yaml") == ("digits", "bench", {"num_workers": 2}, {})
    with pytest.raises(SpecError, match="no such spec file"):
        settings_file(tmp_path / "missing.json")
