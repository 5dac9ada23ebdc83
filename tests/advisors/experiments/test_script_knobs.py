"""A fix in the script's own terms (fast, in-process): the agent's record of a script's knobs
(:mod:`stepwise_agent.inject.config`) and the analyst's mapping of a fix onto them
(:mod:`advisors.fixes.conventions`): HfArgumentParser fields on the command line or in the JSON file, a
plain argparse flag matched by name *and* by where its value reaches, a configurator global; a script without
knobs gets none. The runs themselves, in the user's environment, are in ``test_script_knob_runs.py``."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

from advisors.fixes.conventions.config_text import json_with, yaml_with
from advisors.fixes.conventions import knob_change
from advisors.fixes.conventions.editing import CONFIG_DIR, with_flag, with_override
from advisors.fixes.conventions.shown import command_evidence, shown_change
from advisors.script_reach import reaches
from advisors.experiments.script_diff import render
from advisors.experiments.script_terms import construction_site
from advisors.fixes import FIXES
from stepwise_agent.inject.config import ConfigRecorder

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

FLAGS = """import argparse
import torch
from torch.utils.data import DataLoader
parser = argparse.ArgumentParser()
parser.add_argument("-j", "--workers", type=int, default=0)
parser.add_argument("--nworkers_unused", type=int, default=0)
parser.add_argument("--amp", action="store_true")
parser.add_argument("--compile", action="store_true")
args = parser.parse_args()
loader = DataLoader(list(range(8)), num_workers=args.workers)
with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=args.amp):
    pass
"""


def recorded(
    tmp_path: Path, source: str, argv: list[str], name: str = "train.py"
) -> dict[str, Any]:
    """Run ``source`` as ``python name ARGV…`` in this process under the recorder; its ``config`` record."""
    script = tmp_path / name
    script.write_text(source)
    rec = ConfigRecorder(argv, str(script))
    old = sys.argv
    rec.install()
    try:
        sys.argv = [str(script), *argv]
        namespace = runpy.run_path(str(script), run_name="__main__")
        rec.on_first_step(namespace)  # the agent reads the running __main__'s
    finally:
        sys.argv = old
        rec.uninstall()
    return json.loads(json.dumps(rec.to_json()))


def test_argparse_options_defaults_and_parsed_values_are_recorded(tmp_path: Path) -> None:
    config = recorded(tmp_path, FLAGS, ["--workers", "2"])
    (parser,) = config["parsers"]
    options = {o["dest"]: o for o in parser["options"]}
    assert options["workers"]["flags"] == ["-j", "--workers"] and options["workers"]["value"] == 2
    assert options["workers"]["default"] == 0 and options["workers"]["type"] == "int"
    assert options["amp"]["action"] == "store_true" and options["amp"]["value"] is False
    assert parser["site"]["line"] == 9 and parser["site"]["code"] == "args = parser.parse_args()"
    (ctx,) = config["autocast"]
    assert ctx["dtype"] == "bfloat16" and ctx["enabled"] is False and ctx["site"]["line"] == 11


def test_a_flag_maps_by_its_name_and_where_its_value_reaches(tmp_path: Path) -> None:
    config = recorded(tmp_path, FLAGS, [])
    command = ("python", "train.py")
    bf16 = knob_change({"autocast": "bf16"}, config, command, str(tmp_path), "autocast")
    assert (
        bf16 is not None
        and bf16.command == ("python", "train.py", "--amp")
        and bf16.observe == {"autocast": "bf16"}
    )
    workers = knob_change(
        {"num_workers": 4, "persistent_workers": True, "prefetch_factor": 4},
        config,
        command,
        str(tmp_path),
        "num_workers",
    )
    assert workers is not None and workers.command == ("python", "train.py", "--workers", "4")
    assert workers.observe == {"num_workers": 4}  # what the flag cannot set is not part of this arm
    # --compile is named for it but its value reaches no torch.compile: not the knob
    assert knob_change({"compile": True}, config, command, str(tmp_path), "compile") is None
    assert "workers" in reaches(str(tmp_path / "train.py"))["dataloader"]
    assert "nworkers_unused" not in reaches(str(tmp_path / "train.py"))["dataloader"]
    # an fp16 fix does not map to a bf16 autocast flag
    assert knob_change({"autocast": "fp16"}, config, command, str(tmp_path), "autocast") is None


def test_a_flag_already_on_the_command_line_is_changed_in_place() -> None:
    assert with_flag(("p", "t.py", "-j", "0", "--lr", "1"), ["-j", "--workers"], "4") == (
        "p",
        "t.py",
        "-j",
        "4",
        "--lr",
        "1",
    )
    assert with_flag(("p", "t.py", "--compile=False"), ["--compile"], "True", equals=True) == (
        "p",
        "t.py",
        "--compile=True",
    )
    assert with_flag(("p", "t.py"), ["--bf16"], None) == ("p", "t.py", "--bf16")
    assert with_flag(("p", "t.py", "--bf16", "false", "--x"), ["--bf16"], None) == (
        "p",
        "t.py",
        "--bf16",
        "true",
        "--x",
    )
    assert (
        command_evidence(("p", "t.py", "-j", "0"), ("p", "t.py", "-j", "4"))
        == "ran your own command with -j 4 (nothing injected)"
    )


def test_a_configurator_global_is_the_knob(tmp_path: Path) -> None:
    (tmp_path / "configurator.py").write_text((SCRIPTS / "configurator.py").read_text())
    source = (
        "import os\ncompile = False\nbatch_size = 8\n"
        "exec(open(os.path.join(os.path.dirname(__file__), 'configurator.py')).read())\n"
    )
    config = recorded(tmp_path, source, ["--batch_size=16"])
    assert config["globals"] == {"compile": False, "batch_size": 16}
    change = knob_change(
        {"compile": True},
        config,
        ("python", "train.py", "--batch_size=16"),
        str(tmp_path),
        "compile",
    )
    assert change is not None and change.command == (
        "python",
        "train.py",
        "--batch_size=16",
        "--compile=True",
    )
    assert change.line == 2 and change.flags == ("--compile=True",)
    # its autocast context is not live here (nanoGPT's ctx is a nullcontext on a CPU): no --dtype
    assert (
        knob_change({"autocast": "bf16"}, config, ("python", "train.py"), str(tmp_path), "autocast")
        is None
    )


def hf_config(fields: list[str], file: str | None = None) -> dict[str, Any]:
    options = [
        {
            "flags": [f"--{f}"],
            "dest": f,
            "default": None,
            "value": None,
            "action": "store",
            "type": None,
        }
        for f in fields
    ]
    parsers = [
        {"class": "HfArgumentParser", "site": {"file": "/x/run.py", "line": 7}, "options": options}
    ]
    files = [{"file": file, "class": "HfArgumentParser", "fields": fields}] if file else []
    return {"parsers": [] if file else parsers, "files": files, "autocast": []}


def test_hf_fields_on_the_command_line() -> None:
    fields = [
        "bf16",
        "fp16",
        "dataloader_num_workers",
        "dataloader_persistent_workers",
        "dataloader_prefetch_factor",
        "torch_compile",
    ]
    change = knob_change(
        {"autocast": "bf16"}, hf_config(fields), ("python", "run.py", "--lr", "1"), "/x", "autocast"
    )
    assert change is not None and change.command == ("python", "run.py", "--lr", "1", "--bf16")
    workers = knob_change(
        {"num_workers": 2, "persistent_workers": True, "prefetch_factor": 4},
        hf_config(fields),
        ("python", "run.py"),
        "/x",
        "num_workers",
    )
    assert workers is not None and workers.command[2:] == (
        "--dataloader_num_workers",
        "2",
        "--dataloader_persistent_workers",
        "--dataloader_prefetch_factor",
        "4",
    )
    assert (
        knob_change(
            {"matmul_precision": "high"}, hf_config(fields), ("python", "run.py"), "/x", "x"
        )
        is None
    )


def test_hf_json_file_is_changed_in_a_copy_and_shown_as_its_diff(tmp_path: Path) -> None:
    user = tmp_path / "args.json"
    user.write_text((SCRIPTS / "hf_args.json").read_text())
    before = user.read_text()
    config = hf_config(["bf16", "fp16", "output_dir"], file=str(user))
    change = knob_change(
        {"autocast": "bf16"}, config, ("python", "run.py", "args.json"), str(tmp_path), "autocast"
    )
    assert change is not None and user.read_text() == before  # the user's file is never written
    copy = Path(change.command[2])
    assert copy.name == "args.json" and copy.parent.parent == CONFIG_DIR
    assert json.loads(copy.read_text()) == {**json.loads(before), "bf16": True}
    shown = shown_change(("python", "run.py", str(user)), change.command)
    assert shown["kind"] == "config" and '+  "bf16": true,' in shown["text"].splitlines()
    assert (
        command_evidence(("python", "run.py", str(user)), change.command)
        == 'ran your own command with args.json changed: "bf16": true'
    )
    assert json_with('{"bf16": false}', {"bf16": True}) == '{"bf16": true}\n'


def test_hf_yaml_file_is_changed_in_a_copy_at_its_line(tmp_path: Path) -> None:
    user = tmp_path / "args.yaml"
    text = (SCRIPTS / "hf_args.yaml").read_text()
    user.write_text(text.replace("use_cpu: true", "bf16: false  # not yet\nuse_cpu: true"))
    before = user.read_text()
    config = hf_config(["bf16", "fp16", "output_dir"], file=str(user))
    change = knob_change(
        {"autocast": "bf16"}, config, ("python", "run.py", "args.yaml"), str(tmp_path), "autocast"
    )
    assert change is not None and user.read_text() == before
    copy = Path(change.command[2])
    assert copy.name == "args.yaml" and copy.parent.parent == CONFIG_DIR
    assert copy.read_text() == before.replace(
        "bf16: false  # not yet", "bf16: true  # not yet"
    )  # in place
    assert change.line == before.splitlines().index(
        "bf16: false  # not yet"
    ) + 1 and change.flags == ("bf16: true",)
    shown = shown_change(("python", "run.py", str(user)), change.command)
    assert shown["kind"] == "config" and "+bf16: true  # not yet" in shown["text"].splitlines()
    assert (
        command_evidence(("python", "run.py", str(user)), change.command)
        == "ran your own command with args.yaml changed: bf16: true  # not yet"
    )
    # a file without the key gets it at its end; one the script did not read from its command line gets nothing
    added = knob_change(
        {"autocast": "bf16"},
        hf_config(["bf16"], file=str(SCRIPTS / "hf_args.yaml")),
        ("python", "run.py", str(SCRIPTS / "hf_args.yaml")),
        str(tmp_path),
        "autocast",
    )
    assert added is not None and Path(added.command[2]).read_text().endswith(
        "use_cpu: true\nbf16: true\n"
    )
    assert (
        knob_change({"autocast": "bf16"}, config, ("python", "run.py"), str(tmp_path), "autocast")
        is None
    )


def test_yaml_keys_nested_and_new_keep_the_rest_of_the_file() -> None:
    text = "# run\ntrainer:\n    max_epochs: 3  # short\n    precision: 32\nmodel:\n    width: 8\n"
    out, line = yaml_with(text, {"trainer.precision": "bf16-mixed"})  # type: ignore[misc]
    assert out == text.replace("precision: 32", "precision: bf16-mixed") and line == 4
    out, line = yaml_with(text, {"trainer.accelerator": "cpu"})  # type: ignore[misc]
    assert out.splitlines()[4] == "    accelerator: cpu" and line == 5
    out, line = yaml_with(text, {"data.num_workers": 4})  # type: ignore[misc]
    assert out.endswith("width: 8\ndata:\n  num_workers: 4\n") and line == 8
    assert yaml_with("trainer: {precision: 32}\n", {"trainer.precision": "bf16-mixed"}) == (
        "trainer:\n  precision: bf16-mixed\n",
        1,
    )  # flow style: rewritten whole
    assert yaml_with("trainer: 3\n", {"trainer.precision": "bf16-mixed"}) is None
    assert yaml_with("yes_word: x\n", {"name": "on"})[0].endswith('name: "on"\n')  # type: ignore[index]


def cli_config(files: list[str]) -> dict[str, Any]:
    """What the agent records of a LightningCLI parse (a jsonargparse parser and the --config files it read)."""
    options = [
        {
            "flags": ["-c", "--config"],
            "dest": "config",
            "action": "ActionConfigFile",
            "value": files,
        },
        {
            "flags": ["--trainer.precision"],
            "dest": "trainer.precision",
            "action": "ActionTypeHint",
            "value": None,
        },
    ]
    return {
        "parsers": [
            {
                "class": "LightningArgumentParser",
                "library": "jsonargparse",
                "options": options,
                "site": {"file": "/x/train.py", "line": 30},
            }
        ],
        "files": [
            {"file": f, "library": "jsonargparse", "class": "LightningArgumentParser"}
            for f in files
        ],
    }


def test_lightning_cli_precision_is_the_flag_or_the_config_files_trainer_line(
    tmp_path: Path,
) -> None:
    bf16 = {"autocast": "bf16"}
    flag = knob_change(
        bf16, cli_config([]), ("python", "train.py", "fit"), str(tmp_path), "autocast"
    )
    assert flag is not None and flag.command == (
        "python",
        "train.py",
        "fit",
        "--trainer.precision",
        "bf16-mixed",
    )
    assert (flag.file, flag.line, flag.convention) == ("/x/train.py", 30, "lightning_cli")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("trainer:\n  max_epochs: 3\n  precision: 32-true\nmodel:\n  width: 8\n")
    command = ("python", "train.py", "fit", f"--config={cfg.name}")
    change = knob_change(bf16, cli_config([str(cfg)]), command, str(tmp_path), "autocast")
    assert change is not None and change.command[-1].startswith("--config=") and change.line == 3
    assert Path(change.command[-1].split("=", 1)[1]).read_text() == cfg.read_text().replace(
        "32-true", "bf16-mixed"
    )
    assert change.flags == ("precision: bf16-mixed",)
    # typed on the command line, the flag wins over the file: it is the flag that changes, in place
    typed = knob_change(
        bf16,
        cli_config([str(cfg)]),
        (*command, "--trainer.precision", "32-true"),
        str(tmp_path),
        "autocast",
    )
    assert typed is not None and typed.command == (*command, "--trainer.precision", "bf16-mixed")
    # a file without a trainer section: the flag
    other = tmp_path / "model.yaml"
    other.write_text("model:\n  width: 8\n")
    plain = knob_change(
        bf16,
        cli_config([str(other)]),
        ("python", "train.py", "fit", "-c", "model.yaml"),
        str(tmp_path),
        "autocast",
    )
    assert plain is not None and plain.command[-2:] == ("--trainer.precision", "bf16-mixed")
    assert (
        knob_change(
            {"autocast": "bf16"}, {"parsers": [], "files": []}, ("python", "t.py"), "/x", "autocast"
        )
        is None
    )


def test_accelerate_launch_gets_mixed_precision_when_the_scripts_accelerator_takes_none() -> None:
    at = {"file": "/x/train.py", "line": 9}
    config = {"frameworks": {"accelerate": {"asked": {"mixed_precision": None}, "at": at}}}
    command = ("/env/bin/accelerate", "launch", "--num_processes", "1", "train.py", "--lr", "1")
    change = knob_change({"autocast": "bf16"}, config, command, "/x", "autocast")
    assert (
        change is not None
        and change.convention == "accelerate"
        and (change.file, change.line) == ("/x/train.py", 9)
    )
    assert change.command == (
        "/env/bin/accelerate",
        "launch",
        "--mixed_precision",
        "bf16",
        "--num_processes",
        "1",
        "train.py",
        "--lr",
        "1",
    )
    typed = ("/env/bin/accelerate", "launch", "--mixed_precision", "no", "train.py")
    assert knob_change({"autocast": "bf16"}, config, typed, "/x", "autocast").command == (
        "/env/bin/accelerate",
        "launch",
        "--mixed_precision",
        "bf16",
        "train.py",
    )  # type: ignore[union-attr]
    # the script's own Accelerator(mixed_precision="no") decides: the launcher's option would not reach it
    own = {"frameworks": {"accelerate": {"asked": {"mixed_precision": "no"}, "at": at}}}
    assert knob_change({"autocast": "bf16"}, own, command, "/x", "autocast") is None
    assert (
        knob_change({"autocast": "bf16"}, config, ("python", "train.py"), "/x", "autocast") is None
    )


HYDRA = """import torch
from torch.utils.data import DataLoader
def main(cfg):
    loader = DataLoader(list(range(8)), num_workers=cfg.data.workers, batch_size=cfg.data.batch_size)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=cfg.amp):
        pass
"""


def test_a_hydra_override_maps_by_its_key_and_where_its_value_reaches(tmp_path: Path) -> None:
    script, conf = tmp_path / "train.py", tmp_path / "train.yaml"
    script.write_text(HYDRA)
    conf.write_text("amp: false\nunused_workers: 0\ndata:\n  batch_size: 8\n  workers: 0\n")
    values = {"amp": False, "unused_workers": 0, "data.batch_size": 8, "data.workers": 0}
    autocast = [{"dtype": "bfloat16", "enabled": False}]
    config = {
        "script": str(script),
        "autocast": autocast,
        "hydra": {"values": values, "file": str(conf), "overrides": []},
    }
    command = ("python", "train.py", "data.batch_size=16")
    bf16 = knob_change({"autocast": "bf16"}, config, command, str(tmp_path), "autocast")
    assert (
        bf16 is not None
        and bf16.command == (*command, "amp=true")
        and (bf16.file, bf16.line) == (str(conf), 1)
    )
    workers = knob_change(
        {"num_workers": 4, "persistent_workers": True},
        config,
        command,
        str(tmp_path),
        "num_workers",
    )
    assert (
        workers is not None
        and workers.command == (*command, "data.workers=4")
        and workers.line == 5
    )
    assert workers.observe == {
        "num_workers": 4
    }  # not unused_workers: its value reaches no DataLoader
    assert (
        knob_change({"autocast": "fp16"}, config, command, str(tmp_path), "autocast") is None
    )  # a bf16 context
    assert knob_change({"compile": True}, config, command, str(tmp_path), "compile") is None
    assert with_override(("p", "t.py", "+amp=false", "x=1"), "amp", "true") == (
        "p",
        "t.py",
        "+amp=true",
        "x=1",
    )


@pytest.mark.parametrize(
    "call",
    [
        "L.Trainer(**cfg.trainer, logger=False)",
        "L.Trainer(precision=cfg.trainer.precision, max_epochs=cfg.trainer.epochs)",
    ],
)
def test_a_hydra_key_that_reaches_a_lightning_trainers_precision(tmp_path: Path, call: str) -> None:
    script, conf = tmp_path / "train.py", tmp_path / "train.yaml"
    script.write_text(f"import lightning as L\ndef main(cfg):\n    trainer = {call}\n")
    conf.write_text("trainer:\n  epochs: 3\n  precision: 32-true\nprecision: 32\n")
    values = {"trainer.epochs": 3, "trainer.precision": "32-true", "precision": 32}
    config = {"script": str(script), "hydra": {"values": values, "file": str(conf)}}
    change = knob_change(
        {"autocast": "bf16"}, config, ("python", "train.py"), str(tmp_path), "autocast"
    )
    assert (
        change is not None
        and change.command[-1] == "trainer.precision=bf16-mixed"
        and change.line == 3
    )
    top = {
        **config,
        "hydra": {**config["hydra"], "values": {"precision": 32, **values}},
    }  # first: not the one
    assert (
        knob_change(
            {"autocast": "bf16"}, top, ("python", "train.py"), str(tmp_path), "autocast"
        ).command[-1]
        == "trainer.precision=bf16-mixed"
    )  # type: ignore[union-attr]
    script.write_text(
        "import lightning as L\ndef main(cfg):\n    trainer = L.Trainer(max_epochs=cfg.trainer.epochs)\n"
    )
    assert (
        knob_change({"autocast": "bf16"}, config, ("python", "train.py"), str(tmp_path), "autocast")
        is None
    )


def test_a_script_without_knobs_gets_no_knob_change(tmp_path: Path) -> None:
    config = recorded(tmp_path, "x = 1\n", [])
    assert config["parsers"] == [] and config["globals"] == {}
    assert (
        knob_change({"autocast": "bf16"}, config, ("python", "train.py"), str(tmp_path), "autocast")
        is None
    )


@pytest.mark.parametrize("script", ["noknobs_train.py"])
def test_compile_goes_where_the_model_is_built_and_autocast_around_the_training_call(
    script: str,
) -> None:
    path = SCRIPTS / script
    lines = path.read_text().splitlines()
    train = next(
        i
        for i, x in enumerate(lines, 1)
        if "loss = (model(x)" in x and x.startswith("    ") and not x.startswith("        ")
    )
    evaluation = next(i for i, x in enumerate(lines, 1) if "loss = (model(x)" in x and i != train)
    built = next(i for i, x in enumerate(lines, 1) if x == "model = model.to(device)")
    site = {"file": str(path), "line": train, "grad": True}
    where = construction_site(site)
    assert where is not None and where["line"] == built  # after .to(device), once, not in the loop
    assert (
        construction_site({"file": str(path), "line": evaluation, "grad": False})["line"] == built
    )
    change = render(
        FIXES["torch_compile"],
        {"compile": True},
        "model_call",
        {**where, "target": "model_build", "all": [where]},
    )
    assert change.kind == "diff" and "+model = torch.compile(model)" in change.text.splitlines()
    sites = [{"file": str(path), "line": evaluation, "grad": False}, site]
    bf16 = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        {**site, "target": "model_call", "all": sites},
    )
    added = [x for x in bf16.text.splitlines() if x.startswith("+") and not x.startswith("+++")]
    assert added[0] == "+    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):"
    assert bf16.text.count("torch.autocast(") == 1  # the training call only, not the evaluation's


def test_optimize_prints_the_kept_changes_after_the_table() -> None:
    from cli.optimize import changes_text

    result = {
        "rounds": [
            {
                "fix": "bf16_autocast",
                "fix_title": "bf16 autocast",
                "kept": True,
                "where": "/x/train.py:9",
                "change": {
                    "kind": "command",
                    "text": "- python train.py\n+ python train.py --amp\n",
                },
            },
            {
                "fix": "torch_compile",
                "fix_title": "torch.compile",
                "kept": False,
                "where": "/x/train.py:3",
                "change": {"kind": "diff", "text": "+model = torch.compile(model)\n"},
            },
            {
                "fix": "foreach_optimizer",
                "fix_title": "foreach optimizer",
                "kept": True,
                "where": "/x/train.py:4",
                "change": {
                    "kind": "diff",
                    "text": "--- a/train.py\n+++ b/train.py\n-opt = A()\n+opt = A(foreach=True)\n",
                },
            },
        ]
    }
    lines = changes_text(result)
    assert lines[:4] == [
        "",
        "bf16 autocast: change your command line",
        "- python train.py",
        "+ python train.py --amp",
    ]
    assert "torch.compile" not in "\n".join(lines)  # only the kept fixes
    assert (
        "foreach optimizer: change your code (at /x/train.py:4)" in lines
        and "+opt = A(foreach=True)" in lines
    )


def test_the_working_directory_is_the_users_choice_or_the_scripts_folder(tmp_path: Path) -> None:
    from app.services.launching import script_cwd

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train.py").write_text("x = 1\n")
    argv = ["python", str(tmp_path / "sub" / "train.py"), "--lr", "1"]
    assert script_cwd(argv, None) == (argv, str(tmp_path / "sub"))  # blank: the script's own folder
    assert script_cwd(["python", "sub/train.py"], str(tmp_path)) == (
        ["python", "sub/train.py"],
        str(tmp_path),
    )


def test_autocast_in_place_of_the_scripts_own_context() -> None:
    path = SCRIPTS / "flags_train.py"
    line = next(
        i for i, x in enumerate(path.read_text().splitlines(), 1) if "loss = nn.functional" in x
    )
    site = {"file": str(path), "line": line, "grad": True}
    change = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        {**site, "target": "model_call", "all": [site]},
    )
    added = [x for x in change.text.splitlines() if x.startswith("+") and not x.startswith("+++")]
    assert added == [
        "+        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=True):"
    ]
