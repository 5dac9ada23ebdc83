"""LightningCLI's model/data options and ``accelerate launch``'s dynamo option as a fix's knob (fast, in-process):
an option maps only where its value demonstrably reaches the call that does the fix
(:func:`advisors.script_reach.lightning_reaches`), never by its name alone; ``--dynamo_backend`` only where the
script's own ``Accelerator(...)`` was recorded taking no dynamo argument of its own. The runs are in
``test_script_knob_runs.py``."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from advisors.fixes.conventions import knob_change
from advisors.script_reach import lightning_reaches
from stepwise_agent.inject.frameworks import FrameworkInjection
from stepwise_agent.inject.report import InjectionReport

DATA = """import torch
from torch.utils.data import DataLoader
from lightning.pytorch.cli import LightningCLI
class Model:
    def __init__(self, width: int = 8, compile: bool = False, num_workers: int = 0) -> None:
        self.net = torch.nn.Linear(width, width)
        if compile:
            self.net = torch.compile(self.net)
class Data:
    def __init__(self, batch_size: int = 8, num_workers: int = 0) -> None:
        {store}
    def train_dataloader(self):
        return DataLoader(list(range(8)), batch_size=self.hparams.batch_size, num_workers={read})
if __name__ == "__main__":
    LightningCLI(Model, datamodule_class=Data)
"""
STORES = {
    "hparams": ("self.save_hyperparameters()", "self.hparams.num_workers"),
    "named": (
        'self.save_hyperparameters("num_workers", "batch_size")',
        'self.hparams["num_workers"]',
    ),
    "attribute": ("self.workers = num_workers", "self.workers"),
}


def cli(script: Path, files: list[str] | None = None, **values: Any) -> dict[str, Any]:
    """The agent's record of a LightningCLI parser of ``script`` with the options ``values`` (dest -> value)."""
    options = [
        {
            "flags": ["-c", "--config"],
            "dest": "config",
            "action": "ActionConfigFile",
            "value": None,
        },
        *(
            {"flags": [f"--{d}"], "dest": d, "action": "ActionTypeHint", "value": v, "default": v}
            for d, v in values.items()
        ),
    ]
    return {
        "parsers": [
            {
                "class": "LightningArgumentParser",
                "library": "jsonargparse",
                "options": options,
                "site": {"file": str(script), "line": 15},
            }
        ],
        "files": [
            {"file": f, "library": "jsonargparse", "class": "LightningArgumentParser"}
            for f in files or []
        ],
    }


def write(
    tmp_path: Path,
    store: str = "self.save_hyperparameters()",
    read: str = "self.hparams.num_workers",
    source: str = DATA,
) -> Path:
    script = tmp_path / "train.py"
    script.write_text(source.replace("{store}", store).replace("{read}", read))
    return script


@pytest.mark.parametrize("how", sorted(STORES))
def test_a_data_modules_workers_option_that_reaches_its_dataloader_is_the_flag(
    tmp_path: Path, how: str
) -> None:
    script = write(tmp_path, *STORES[how])
    assert lightning_reaches(str(script))["data"]["dataloader"] == {"num_workers"}
    config = cli(script, **{"data.num_workers": 0, "data.batch_size": 8, "model.num_workers": 0})
    knobs = {"num_workers": 4, "persistent_workers": True}
    change = knob_change(knobs, config, ("python", "train.py", "fit"), str(tmp_path), "num_workers")
    assert change is not None and change.convention == "lightning_cli"
    assert change.command == ("python", "train.py", "fit", "--data.num_workers", "4")
    assert change.observe == {
        "num_workers": 4
    }  # persistent_workers: no option sets it, left out of the arm
    assert (change.file, change.line, change.flags) == (str(script), 15, ("--data.num_workers 4",))
    typed = knob_change(
        knobs,
        config,
        ("python", "train.py", "fit", "--data.num_workers=1"),
        str(tmp_path),
        "num_workers",
    )
    assert typed is not None and typed.command == (
        "python",
        "train.py",
        "fit",
        "--data.num_workers=4",
    )


@pytest.mark.parametrize(
    "store, read",
    [
        (
            "self.save_hyperparameters()",
            "2",
        ),  # the loader's worker count is a constant: the option reaches nothing
        ("self.workers = num_workers", "self.hparams.num_workers"),  # hparams never saved
        (
            'self.save_hyperparameters("batch_size")',
            "self.hparams.num_workers",
        ),  # saved, but not this one
        ("self.workers = batch_size", "self.workers"),  # another parameter under the attribute
    ],
)
def test_a_workers_option_that_does_not_reach_a_dataloader_maps_to_nothing(
    tmp_path: Path, store: str, read: str
) -> None:
    script = write(tmp_path, store, read)
    config = cli(
        script, **{"data.num_workers": 0, "model.num_workers": 0}
    )  # model's: stored nowhere either
    assert (
        knob_change(
            {"num_workers": 4}, config, ("python", "train.py", "fit"), str(tmp_path), "num_workers"
        )
        is None
    )


def test_a_class_the_cli_is_not_given_reaches_nothing(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        source=DATA.replace("LightningCLI(Model, datamodule_class=Data)", "LightningCLI(Model)"),
    )
    assert "data" not in lightning_reaches(str(script))
    assert (
        knob_change(
            {"num_workers": 4},
            cli(script, **{"data.num_workers": 0}),
            ("python", "train.py", "fit"),
            str(tmp_path),
            "num_workers",
        )
        is None
    )


def test_the_workers_line_of_the_config_file_in_a_copy(tmp_path: Path) -> None:
    script = write(tmp_path)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("trainer:\n  max_epochs: 3\ndata:\n  batch_size: 8\n  num_workers: 0\n")
    change = knob_change(
        {"num_workers": 4},
        cli(script, [str(cfg)], **{"data.num_workers": 0}),
        ("python", "train.py", "fit", "--config", "cfg.yaml"),
        str(tmp_path),
        "num_workers",
    )
    assert change is not None and change.config is not None and change.config[0] == str(cfg)
    assert Path(change.command[-1]).read_text() == cfg.read_text().replace(
        "num_workers: 0", "num_workers: 4"
    )
    assert (
        change.flags == ("num_workers: 4",)
        and change.line == 5
        and change.observe == {"num_workers": 4}
    )
    assert cfg.read_text().endswith("num_workers: 0\n")  # the user's file untouched


def test_a_models_compile_option_maps_only_where_it_reaches_torch_compile(tmp_path: Path) -> None:
    script = write(tmp_path)
    assert lightning_reaches(str(script))["model"]["compile"] == {"compile"}
    config = cli(script, **{"model.compile": False, "model.width": 8})
    change = knob_change(
        {"compile": True}, config, ("python", "train.py", "fit"), str(tmp_path), "compile"
    )
    assert change is not None and change.command[-2:] == ("--model.compile", "true")
    assert change.observe == {"compile": True}
    # the same option, the model never compiling: injection stays
    plain = write(tmp_path, source=DATA.replace("torch.compile(self.net)", "self.net"))
    assert (
        knob_change(
            {"compile": True},
            cli(plain, **{"model.compile": False}),
            ("python", "train.py", "fit"),
            str(tmp_path),
            "compile",
        )
        is None
    )
    # a data module's option named compile is not the model's
    assert (
        knob_change(
            {"compile": True},
            cli(script, **{"data.compile": False}),
            ("python", "train.py", "fit"),
            str(tmp_path),
            "compile",
        )
        is None
    )


AT = {"file": "/x/train.py", "line": 9}
LAUNCH = ("/env/bin/accelerate", "launch", "--num_processes", "1", "train.py", "--lr", "1")


@pytest.mark.parametrize(
    "asked, mapped",
    [
        ({"mixed_precision": None, "dynamo_backend": None, "dynamo_plugin": None}, True),
        (
            {"mixed_precision": None, "dynamo_backend": "no", "dynamo_plugin": None},
            False,
        ),  # its own argument decides
        (
            {
                "mixed_precision": None,
                "dynamo_backend": None,
                "dynamo_plugin": "TorchDynamoPlugin(...)",
            },
            False,
        ),
        ({"mixed_precision": None}, False),  # recorded by an agent that did not look: no claim
    ],
)
def test_accelerate_launch_gets_dynamo_backend_when_the_scripts_accelerator_takes_none(
    asked: dict[str, Any], mapped: bool
) -> None:
    config = {"frameworks": {"accelerate": {"asked": asked, "at": AT}}}
    change = knob_change({"compile": True}, config, LAUNCH, "/x", "compile")
    if not mapped:
        assert change is None
        return
    assert (
        change is not None
        and change.convention == "accelerate"
        and change.observe == {"compile": True}
    )
    assert change.command == (
        "/env/bin/accelerate",
        "launch",
        "--dynamo_backend",
        "inductor",
        "--num_processes",
        "1",
        "train.py",
        "--lr",
        "1",
    )
    assert change.flags == ("--dynamo_backend inductor",) and (change.file, change.line) == (
        "/x/train.py",
        9,
    )
    assert (
        knob_change({"compile": True}, config, ("python", "train.py"), "/x", "compile") is None
    )  # no launcher


def test_accelerate_has_no_workers_option() -> None:
    config = {
        "frameworks": {
            "accelerate": {"asked": {"mixed_precision": None, "dynamo_backend": None}, "at": AT}
        }
    }
    assert knob_change({"num_workers": 4}, config, LAUNCH, "/x", "num_workers") is None


@pytest.mark.parametrize(
    "kwargs, env, held",
    [({}, "inductor", "INDUCTOR"), ({}, "no", "NO"), ({"dynamo_backend": "no"}, "inductor", "NO")],
)
def test_the_agent_records_the_accelerators_dynamo_arguments_and_what_it_holds(
    kwargs: dict[str, Any], env: str, held: str
) -> None:
    class Accelerator:  # accelerate's: its own argument, else ACCELERATE_DYNAMO_BACKEND (what launch sets)
        def __init__(
            self, dynamo_backend: str | None = None, mixed_precision: str | None = None
        ) -> None:
            backend = SimpleNamespace(value=(dynamo_backend or env).upper())
            self.state = SimpleNamespace(dynamo_plugin=SimpleNamespace(backend=backend))
            self.mixed_precision = mixed_precision or "no"

    module = ModuleType("accelerate.accelerator")
    module.Accelerator = Accelerator  # type: ignore[attr-defined]
    report = InjectionReport({"compile": True})
    modules: Any = SimpleNamespace(framework_owns=set(), device="cpu")
    inj = FrameworkInjection({"compile": True}, report, modules)
    inj.observe = {"compile"}  # the patched arm: the launcher's option sets it, nothing injected
    inj._patch_accelerate(module)
    Accelerator(**kwargs)
    rec = inj.frameworks["accelerate"]
    assert rec["asked"] == {
        "mixed_precision": None,
        "dynamo_backend": kwargs.get("dynamo_backend"),
        "dynamo_plugin": None,
    }
    assert rec["held"] == {"mixed_precision": "no", "dynamo_backend": held}
    evidence = report.knob("compile").evidence  # type: ignore[union-attr]
    assert bool(evidence) == (held != "NO")
    assert all(
        "Accelerator(dynamo_backend='INDUCTOR')" in e and "accelerate launch" in e for e in evidence
    )
