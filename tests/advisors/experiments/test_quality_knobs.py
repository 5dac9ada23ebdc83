"""Time-to-quality arms in the script's own terms (fast, in-process): a batch × k / accumulation × k candidate mapped
onto the script's own flags (:mod:`advisors.experiments.quality_knobs`) — an argparse flag only when its value
reaches the DataLoader's ``batch_size`` / the optimizer's ``lr``, HfArgumentParser fields on the command line or in
its JSON/YAML file, LightningCLI's ``--trainer.accumulate_grad_batches`` — and the agent's check of what the
changed command asks for (observed, never injected). The runs themselves are in ``test_quality_knob_runs.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

from advisors.experiments.quality_knobs import (
    NO_WARMUP_FLAG,
    in_own_terms,
    quality_change,
    quality_patched,
    why_injected,
)
from advisors.quality.candidates import Candidate
from advisors.quality.script_candidates import Baseline, asked, why_not_applied
from profilers.run.script_spec import ScriptSpec
from stepwise_agent.inject import Injector
from tests.advisors.experiments.test_script_knobs import recorded

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
BATCH = {"batch_scale": 4, "lr_scale": 2.0}  # Adam family: √4
LOOP = """import argparse
import torch
from torch.utils.data import DataLoader
parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--eval-batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()
loader = DataLoader(list(range(64)), batch_size=args.batch_size)
opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=args.lr)
"""


def test_argparse_batch_and_rate_flags_that_reach_the_loader_and_optimizer(tmp_path: Path) -> None:
    config = recorded(tmp_path, LOOP, ["--lr", "0.001"])
    cmd = ("python", str(tmp_path / "train.py"), "--lr", "0.001")
    change = quality_change(BATCH, config, cmd, str(tmp_path), 16)
    assert change is not None and change.convention == "argparse"
    assert change.command == (
        *cmd[:3],
        "0.002",
        "--batch-size",
        "64",
    )  # the typed --lr changed in place
    assert change.observe == {"batch_size": 64, "lr": 0.002}
    assert change.flags == ("--batch-size 64", "--lr 0.002")


def test_argparse_flags_whose_values_do_not_reach_are_not_used(tmp_path: Path) -> None:
    # the batch flag only names the evaluation loader; the rate flag only a print: injection stays
    source = LOOP.replace("batch_size=args.batch_size", "batch_size=args.eval_batch_size")
    config = recorded(tmp_path, source, [])
    assert quality_change(BATCH, config, ("python", "train.py"), str(tmp_path), 64) is None
    source = LOOP.replace("lr=args.lr", "lr=0.01")
    assert (
        quality_change(
            BATCH, recorded(tmp_path, source, []), ("python", "train.py"), str(tmp_path), 16
        )
        is None
    )


def test_a_warm_up_or_accumulation_without_a_flag_stays_injected(tmp_path: Path) -> None:
    config = recorded(tmp_path, LOOP, [])
    cmd = ("python", "train.py")
    warm = {"batch_scale": 8, "lr_scale": 8.0, "warmup_steps": 5}
    assert quality_change(warm, config, cmd, str(tmp_path), 16) is None
    assert why_injected(warm, config) == NO_WARMUP_FLAG
    assert (
        quality_change({"grad_accum": 4, "lr_scale": 2.0}, config, cmd, str(tmp_path), 16) is None
    )
    assert quality_change({"optimizer_swap": "adamw"}, config, cmd, str(tmp_path), 16) is None
    spec = ScriptSpec(cmd, cwd=str(tmp_path))
    base = Baseline({"type": "AdamW", "lr": 1e-3}, {"batch_size": 16}, None, None, 100, config)
    cand = Candidate("batch_x8_sqrt_lr", "batch × 8", "rule", warm)
    assert quality_patched(spec, cand, base) == spec.patch(inject=warm)
    assert in_own_terms(cand, base, spec).rule == f"rule; {NO_WARMUP_FLAG}"
    flagged = quality_patched(spec, Candidate("batch_x4_sqrt_lr", "batch × 4", "rule", BATCH), base)
    assert flagged.inject == {} and flagged.observe == {"batch_size": 64, "lr": 0.002}
    assert flagged.command == (*cmd, "--batch-size", "64", "--lr", "0.002")


HF_CONFIG: dict[str, Any] = {
    "parsers": [
        {
            "class": "HfArgumentParser",
            "site": {"file": "/x/train.py", "line": 30},
            "options": [
                {
                    "flags": ["--per_device_train_batch_size"],
                    "dest": "per_device_train_batch_size",
                    "value": 8,
                },
                {"flags": ["--learning_rate"], "dest": "learning_rate", "value": 0.001},
                {
                    "flags": ["--gradient_accumulation_steps"],
                    "dest": "gradient_accumulation_steps",
                    "value": 1,
                },
                {"flags": ["--warmup_steps"], "dest": "warmup_steps", "value": 0},
                {"flags": ["--warmup_ratio"], "dest": "warmup_ratio", "value": 0.0},
            ],
        }
    ]
}


def test_hf_fields_on_the_command_line() -> None:
    cmd = ("python", "train.py", "--per_device_train_batch_size", "8", "--learning_rate", "0.001")
    change = quality_change(BATCH, HF_CONFIG, cmd, "/x", 8)
    assert change is not None and change.convention == "hf"
    assert change.command == (
        "python",
        "train.py",
        "--per_device_train_batch_size",
        "32",
        "--learning_rate",
        "0.002",
    )
    assert change.observe == {"batch_size": 32, "lr": 0.002} and change.where()["line"] == 30  # type: ignore[index]
    sgd = quality_change(
        {"batch_scale": 8, "lr_scale": 8.0, "warmup_steps": 3}, HF_CONFIG, cmd, "/x", 8
    )
    assert sgd is not None and sgd.command[-2:] == (
        "--warmup_steps",
        "3",
    )  # HF has a flag for the warm-up
    assert sgd.observe == {"batch_size": 64, "lr": 0.008, "warmup_steps": 3}
    accum = quality_change({"grad_accum": 4, "lr_scale": 2.0}, HF_CONFIG, cmd, "/x", 8)
    assert accum is not None and accum.command[-2:] == ("--gradient_accumulation_steps", "4")
    assert accum.observe == {"lr": 0.002, "accumulation_steps": 4}


def test_hf_fields_in_its_json_and_yaml_files(tmp_path: Path) -> None:
    for name in ("hf_args.json", "hf_args.yaml"):
        path = str(SCRIPTS / name)
        config = {"files": [{"file": path, "class": "HfArgumentParser", "fields": []}]}
        change = quality_change(
            BATCH, config, ("python", "hf_args_train.py", path), str(tmp_path), 8
        )
        assert change is not None and change.config is not None and change.config[0] == path
        copy = Path(change.command[-1])
        assert copy.name == name and copy != Path(path)
        text = copy.read_text()
        data = json.loads(text) if name.endswith(".json") else None
        if data is not None:
            assert data["per_device_train_batch_size"] == 32 and data["learning_rate"] == 0.002
        else:
            assert "per_device_train_batch_size: 32\n" in text and "learning_rate: 0.002\n" in text
        assert change.observe == {"batch_size": 32, "lr": 0.002}


def test_lightning_cli_accumulation_and_rate(tmp_path: Path) -> None:
    script = SCRIPTS / "lightning_cli_train.py"
    config = {
        "parsers": [
            {
                "library": "jsonargparse",
                "class": "LightningArgumentParser",
                "site": {"file": str(script), "line": 33},
                "options": [
                    {
                        "flags": ["--trainer.accumulate_grad_batches"],
                        "dest": "trainer.accumulate_grad_batches",
                        "value": 1,
                        "type": None,
                    },
                    {"flags": ["--model.width"], "dest": "model.width", "value": 512, "type": None},
                    {"flags": ["--model.lr"], "dest": "model.lr", "value": 0.001, "type": None},
                ],
            }
        ]
    }
    cmd = ("python", str(script), "fit", "--config", "cfg.yaml")
    accum = quality_change({"grad_accum": 4, "lr_scale": 2.0}, config, cmd, str(tmp_path), 64)
    assert accum is not None and accum.convention == "lightning_cli"
    assert accum.command == (*cmd, "--trainer.accumulate_grad_batches", "4", "--model.lr", "0.002")
    assert accum.observe == {"lr": 0.002, "accumulation_steps": 4}
    # its DataLoader's batch_size=64 is no option's: the batch arm stays injected
    assert quality_change(BATCH, config, cmd, str(tmp_path), 64) is None


def _agent(observe: dict[str, Any], batch: int, lr: float) -> dict[str, Any]:
    inj = Injector({}, device="cpu", observe=observe)
    inj.install()
    try:
        loader = DataLoader(list(range(64)), batch_size=batch)
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=lr)
        next(iter(loader))
    finally:
        inj.uninstall()
    return inj.finish()


def test_the_agent_checks_what_the_command_asks_for_and_injects_nothing() -> None:
    out = _agent({"batch_size": 64, "lr": 0.002}, 64, 0.002)
    assert out["knobs"]["batch_size"]["acted"] and out["knobs"]["lr"]["acted"]
    assert "yields batches of 64, the size your command asks for" in " ".join(
        out["knobs"]["batch_size"]["evidence"]
    )
    cand = Candidate("batch_x4_sqrt_lr", "batch × 4", "rule", BATCH)
    assert asked(cand, out) == ["batch_size", "lr"] and why_not_applied(cand, out) is None
    wrong = _agent({"batch_size": 64, "lr": 0.002}, 16, 0.002)  # the flag did not reach the loader
    assert not wrong["knobs"]["batch_size"]["acted"]
    assert "not the 64 the changed command asks for" in str(why_not_applied(cand, wrong))


def test_observe_only_knobs_are_refused_when_injected() -> None:
    inj = Injector({"batch_size": 64}, device="cpu")
    inj.install()
    inj.uninstall()
    rec = inj.finish()["knobs"]["batch_size"]
    assert not rec["acted"] and "checked, never injected" in rec["why"]


@pytest.mark.parametrize("value", [0.002, 1e-4 * 3, 0.1 + 0.2])
def test_a_rate_is_typed_as_text_that_reads_back_the_same(value: float) -> None:
    from advisors.experiments.quality_knobs import number

    assert float(number(value)) == value
