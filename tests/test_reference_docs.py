"""The reference in ``docs/reference/`` names everything the code defines: every flag of every
command (walked from the argparse parsers themselves), every top-level field of every ``--json``
document (read from the code that builds it, or from real outputs), every ``STEPWISE_*`` environment
variable, and the rules list is the one ``scripts/rules_doc.py`` writes from the rule files
today."""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import subprocess
import sys
import textwrap
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference"
CLI_DOC = REFERENCE / "cli.md"
_CODE = (
    "advisors",
    "app",
    "cli",
    "profilers",
    "reports",
    "sample_runs",
    "stepwise",
    "stepwise_agent",
)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: p
        for a in parser._actions
        if isinstance(a, argparse._SubParsersAction)
        for name, p in a.choices.items()
    }


def _commands() -> dict[str, argparse.ArgumentParser]:
    from cli.advisors import build_parser
    from cli.profilers import _parser

    return {**_subparsers(build_parser(prog="stepwise")), **_subparsers(_parser("stepwise"))}


def _section(text: str, command: str) -> str:
    """The part of the reference under the ``## stepwise COMMAND`` heading."""
    m = re.search(rf"^## `stepwise {command}\b[^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"docs/reference/cli.md has no section '## `stepwise {command} …`'"
    return m.group(1)


def test_every_command_and_flag_is_in_the_reference():
    text = CLI_DOC.read_text()
    commands = _commands()
    assert {"analyze", "optimize", "compare", "run", "launch", "list", "watch", "capture"} <= set(
        commands
    )
    missing = []
    for name, parser in commands.items():
        section = _section(text, name)
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                if not re.search(rf"`{re.escape(flag)}\b", section):
                    missing.append(f"{name} {flag}")
    assert missing == [], "flags the parsers define that docs/reference/cli.md does not name"


# --- the --json documents' top-level fields, from the code that builds them ----------------------


def _dict_keys(node: ast.AST) -> set[str]:
    """A dict literal's string keys, and those of the dicts it splats in
    (``**({"k": v} if c else {})``)."""
    if isinstance(node, ast.IfExp):
        return _dict_keys(node.body) | _dict_keys(node.orelse)
    if not isinstance(node, ast.Dict):
        return set()
    keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return keys.union(*(_dict_keys(v) for k, v in zip(node.keys, node.values) if k is None))


def _document(node: ast.AST | None, rows: bool = False) -> ast.AST | None:
    """The dict a builder returns or prints: a dict literal, or (``rows``) a list of them, one per
    row."""
    if isinstance(node, ast.Dict):
        return node
    if rows and isinstance(node, ast.ListComp) and isinstance(node.elt, ast.Dict):
        return node.elt
    return None


def built_keys(func: Callable[..., Any]) -> set[str]:
    """The top-level keys ``func`` gives the JSON it builds: those of the dict literal it returns,
    assigns to a name or hands to ``json.dumps``, and ``name["key"] = …`` assignments."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    keys: set[str] = set()
    for node in ast.walk(tree):
        doc = None
        if isinstance(node, ast.Return):
            doc = _document(node.value, rows=True)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) for t in targets):
                doc = _document(node.value)
            for t in targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Name)
                    and isinstance(t.slice, ast.Constant)
                    and isinstance(t.slice.value, str)
                ):
                    keys.add(t.slice.value)
        elif (
            isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "dumps" and node.args
        ):
            doc = _document(node.args[0], rows=True)
        if doc is not None:
            keys |= _dict_keys(doc)
    return keys


def _run_result_keys() -> set[str]:
    from cli.profilers import result_json
    from profilers.run.records import RunResult

    handle = SimpleNamespace(run_id="r", run_dir=Path("r"))
    return set(result_json(handle, RunResult.from_dict({})))  # type: ignore[arg-type]


def _analyze_keys() -> set[str]:
    from advisors.analysis.value import Analysis

    keys = built_keys(Analysis.to_json)
    for path in (REPO / "tests" / "references" / "analyze").glob(
        "*.json"
    ):  # real outputs, kept equal to the code
        keys |= set(json.loads(path.read_text()))
    return keys


def _optimize_keys() -> set[str]:
    from advisors.experiments.optimize import BaselineFailed
    from advisors.experiments.results.ladder_report import ladder_json
    from advisors.experiments.to_quality_report import quality_json
    from cli import optimize, optimize_quality

    return set().union(
        *(
            built_keys(f)
            for f in (
                ladder_json,
                optimize._stored,
                quality_json,
                optimize_quality.main,
                BaselineFailed.to_json,
            )
        )
    )


def _compare_keys() -> set[str]:
    from advisors.compare.regression import check_json
    from cli import compare

    return built_keys(check_json) | built_keys(compare._save_baseline)


def _list_keys() -> set[str]:
    from cli import profilers
    from profilers.run.records import RunRecord

    return {f.name for f in fields(RunRecord)} | built_keys(profilers._list)


def _watch_keys() -> set[str]:
    from cli.watch import run_watch

    return _run_result_keys() | built_keys(run_watch)


#: ``run --json`` is ``launch --json`` (both print :func:`cli.profilers.result_json`): its section
#: says so.
JSON_DOCUMENTS: dict[str, Callable[[], set[str]]] = {
    "analyze": _analyze_keys,
    "optimize": _optimize_keys,
    "compare": _compare_keys,
    "launch": _run_result_keys,
    "list": _list_keys,
    "watch": _watch_keys,
}


def _json_section(text: str, command: str) -> str:
    m = re.search(
        rf"^### `{command} --json`[^\n]*\n(.*?)(?=^##|\Z)", _section(text, command), re.M | re.S
    )
    assert m, (
        f"docs/reference/cli.md's `stepwise {command}` section has no '### `{command} --json`' part"
    )
    return m.group(1)


@pytest.mark.parametrize("command", sorted(JSON_DOCUMENTS))
def test_every_json_field_is_in_the_reference(command: str):
    keys = JSON_DOCUMENTS[command]()
    assert len(keys) >= 5, (
        f"found only {sorted(keys)} for {command} --json: the harvest no longer reads the code"
    )
    section = _json_section(CLI_DOC.read_text(), command)
    missing = sorted(k for k in keys if f"`{k}`" not in section)
    assert missing == [], f"{command} --json fields that docs/reference/cli.md does not name"


def test_run_json_is_documented_as_launch_json():
    assert (
        "the same document as `launch --json`" in _json_section(CLI_DOC.read_text(), "run").lower()
    )


def test_the_harvest_reads_the_fields_a_builder_adds():
    """The AST reading sees returned dicts, dicts assigned then extended, and printed ones."""

    def builder(x: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"a": 1, "nested": {"not_top": 2}}
        out["b"] = 3
        print(json.dumps({"c": 4, **x}))
        return out

    assert built_keys(builder) == {"a", "nested", "b", "c"}


def _env_vars() -> set[str]:
    pattern = re.compile(r"\bSTEPWISE_[A-Z_]*[A-Z]\b")
    return {
        m
        for top in _CODE
        for p in (REPO / top).rglob("*.py")
        for m in pattern.findall(p.read_text())
    }


def test_every_environment_variable_is_in_the_reference():
    names = _env_vars()
    assert {"STEPWISE_HOME", "STEPWISE_INDEX"} <= names
    text = (REFERENCE / "environment.md").read_text()
    assert sorted(n for n in names if f"`{n}" not in text) == []


def test_the_rules_reference_is_generated_from_the_rule_files():
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "rules_doc.py"), "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (REFERENCE / "rules.md").read_text()
    from advisors.rules import RULES

    assert all(f"`{r.id}`" in text for r in RULES)
