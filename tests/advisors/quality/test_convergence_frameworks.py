"""Convergence knobs through a framework's own fields, run in the tests' second environment (``tests.user_env``:
transformers, lightning) as a user runs it (slow): a Hugging Face ``Trainer`` gets ``TrainingArguments``'
``per_device_train_batch_size``, ``learning_rate`` and ``gradient_accumulation_steps``, its loader and optimizer
are not scaled a second time; Lightning gets ``accumulate_grad_batches`` and its user's own DataLoader × k."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from profilers.run.launch import start_script
from profilers.run.script_spec import ScriptSpec
from profilers.store.files import read_json
from profilers.store.runs import RunStore
from tests.user_env import user_python

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
pytestmark = pytest.mark.slow


def _run(tmp_path: Path, script: str, inject: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = ScriptSpec(
        command=(str(user_python()), str(SCRIPTS / script)),
        measure_steps=2,
        warmup_steps=0,
        profile_steps=1,
        inject=inject,
        cwd=str(tmp_path),
    )
    handle = start_script(spec, RunStore(tmp_path / "runs"))
    result = handle.wait(900)
    assert result.status.value == "ok", result.error
    injected = read_json(handle.run_dir / "injected.json")
    assert isinstance(injected, dict) and "partial" not in injected
    return injected


def _line(script: str, needle: str) -> int:
    return next(
        i for i, text in enumerate((SCRIPTS / script).read_text().splitlines(), 1) if needle in text
    )


def test_hf_trainer_takes_the_knobs_as_training_arguments_fields(tmp_path: Path) -> None:
    script = "hf_trainer_train.py"
    injected = _run(tmp_path, script, {"batch_scale": 4, "lr_scale": 2.0, "grad_accum": 2})
    hf = injected["frameworks"]["transformers"]
    assert hf["set"] == {
        "per_device_train_batch_size": 32,
        "learning_rate": pytest.approx(2e-3),
        "gradient_accumulation_steps": 2,
    }
    assert hf["asked"]["per_device_train_batch_size"] == 8 and hf["asked"][
        "learning_rate"
    ] == pytest.approx(1e-3)
    knobs = injected["knobs"]
    assert all(knobs[k]["acted"] for k in ("batch_scale", "lr_scale", "grad_accum")), knobs
    at = f"hf_trainer_train.py:{_line(script, 'args = TrainingArguments(')}"
    assert any(
        f"TrainingArguments(per_device_train_batch_size=32) set at {at}" in e
        for e in knobs["batch_scale"]["evidence"]
    )
    assert injected["loader"]["batch_size"] == 32  # the Trainer's loader: × 4 once, not × 16
    assert injected["sites"]["optimizer"]["lr"] == pytest.approx(
        2e-3
    )  # the Trainer's AdamW, scaled once


def test_lightning_accumulates_itself_and_the_users_dataloader_is_scaled(tmp_path: Path) -> None:
    script = "lightning_train.py"
    injected = _run(tmp_path, script, {"batch_scale": 2, "lr_scale": 1.5, "grad_accum": 2})
    knobs = injected["knobs"]
    assert all(knobs[k]["acted"] for k in ("batch_scale", "lr_scale", "grad_accum")), knobs
    assert injected["frameworks"]["lightning"]["set"] == {"accumulate_grad_batches": 2}
    assert "Lightning accumulates itself" in knobs["grad_accum"]["evidence"][0]
    assert (
        f"lightning_train.py:{_line(script, 'return DataLoader(')}"
        in knobs["batch_scale"]["evidence"][0]
    )
    assert injected["loader"]["batch_size"] == 128
    assert (
        f"AdamW at lightning_train.py:{_line(script, 'return torch.optim.AdamW(')}: lr 0.001 → 0.0015"
        in knobs["lr_scale"]["evidence"][0]
    )
