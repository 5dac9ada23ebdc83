"""A run's configuration as the analysis reads it: what the agent saw of any launched script (a user's reads as a
sample workload's), or an older run's ``spec.json``, field for field; nothing recorded, nothing claimed."""

from __future__ import annotations

import json
from pathlib import Path

from profilers.run.run_config import RunConfig, run_config

H100 = Path(__file__).resolve().parents[2] / "fixtures" / "h100"


def _launch(
    tmp_path: Path,
    settings: dict | None,
    command: list[str] | None = None,
    boot: dict | None = None,
    budget: float | None = None,
) -> Path:
    (tmp_path / "launch.json").write_text(
        json.dumps(
            {
                "command": command or ["python", "train.py"],
                "steps": 3,
                "nproc_per_node": 2,
                "nnodes": 1,
                "memory_budget_mb": budget,
            }
        )
    )
    if settings is not None:
        (tmp_path / "injected.json").write_text(json.dumps({"knobs": {}, "settings": settings}))
    if boot is not None:
        (tmp_path / "boot.json").write_text(json.dumps(boot))
    return tmp_path


def test_a_launched_scripts_settings_are_what_the_agent_saw(tmp_path: Path) -> None:
    run = _launch(
        tmp_path,
        {
            "num_workers": 4,
            "pin_memory": True,
            "precision": "bf16",
            "compile": True,
            "grad_accum_steps": 2,
            "cudnn_benchmark": None,
            "bogus": 1,
        },
        ["python", "-m", "sample_runs.train", "data_bound", "--num-workers", "4"],
        {"warmup": 3, "measure": 5, "profile": 3},
        budget=1500,
    )
    config = run_config(run)
    assert config == RunConfig(
        workload="data_bound",
        num_workers=4,
        pin_memory=True,
        precision="bf16",
        compile=True,
        grad_accum_steps=2,
        memory_budget_mb=1500.0,
        warmup_steps=3,
        steps=12,
        world_size=2,
    )


def test_a_plain_launch_without_a_record_claims_nothing(tmp_path: Path) -> None:
    config = run_config(_launch(tmp_path, None))
    assert (
        config is not None
        and config.num_workers is None
        and config.workload is None
        and not config.compile
    )
    assert (
        config.warmup_steps == 1 and config.steps == 5
    )  # a plain launch: 1 wait step, 1 profiler warm-up, 3
    assert run_config(tmp_path / "nothing") is None


def test_an_older_runs_spec_json_reads_field_for_field() -> None:
    config = run_config(H100 / "memory_oom")
    spec = json.loads((H100 / "memory_oom" / "spec.json").read_text())
    assert config is not None and config.workload == spec["workload"] == "memory_bound"
    assert (config.memory_budget_mb, config.batch_size, config.steps, config.warmup_steps) == (
        float(spec["memory_budget_mb"]),
        spec["batch_size"],
        spec["steps"],
        spec["warmup_steps"],
    )
    assert config.to_dict()["precision"] == spec["precision"]
