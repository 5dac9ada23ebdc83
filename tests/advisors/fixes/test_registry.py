"""The fix registry: each fix is one module whose examples are its tests (like the rules' fires/passes), every fix
a rule proposes is registered, and no other module keeps a table keyed by fix id."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from dataclasses import replace
from pathlib import Path

import pytest

import advisors.fixes
from advisors.experiments.script_fixes import script_knob
from advisors.fixes import FIXES, REGISTRY, FixSpec
from advisors.fixes.base import FixExample
from advisors.rules import RULES
from advisors.rules.base import NOT_STATED
from profilers.run.script_spec import KNOBS, ScriptSpec
from tests.advisors.experiments.test_script_knobs import recorded

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = [(s, i, e) for s in REGISTRY for i, e in enumerate(s.examples)]


@pytest.mark.parametrize(
    ("spec", "i", "example"), EXAMPLES, ids=[f"{s.id}-{i}" for s, i, _ in EXAMPLES]
)
def test_fix_examples(spec: FixSpec, i: int, example: FixExample, tmp_path: Path) -> None:
    why = spec.skip(example.ctx)
    if example.skipped is not None:
        assert why is not None and example.skipped in why, f"{spec.id}: {why!r}"
        return
    assert why is None, f"{spec.id} should apply here, skipped: {why}"
    if example.knobs is not None:
        inj = spec.injection or spec.own_flag
        assert ((inj.knobs(example.ctx) if inj is not None else None) or {}) == dict(example.knobs)
    if example.script is not None:
        config = recorded(tmp_path, example.script, list(example.argv))
        command = ("python", str(tmp_path / "train.py"), *example.argv)
        change = script_knob(
            ScriptSpec(command=command, cwd=str(tmp_path)),
            spec.fix,
            replace(example.ctx, config=config),
        )
        assert change is not None, f"{spec.id}: the script's own flag was not found"
        assert change.command == ("python", str(tmp_path / "train.py"), *(example.changed or ()))


@pytest.mark.parametrize("spec", REGISTRY, ids=[s.id for s in REGISTRY])
def test_every_fix_is_complete_and_shows_where_it_applies_and_where_not(spec: FixSpec) -> None:
    assert spec.title and spec.snippet and spec.explanation and spec.docs.startswith("https://")
    assert spec.fix.to_json()["id"] == spec.id
    assert any(e.skipped is None for e in spec.examples), "an example where the fix applies"
    if spec.applies_to != "any" or spec.conv_only:
        assert any(e.skipped is not None for e in spec.examples), (
            "an example where skip says why not"
        )
    # injected at boot, or said as the change to make (a loop fix may still be the script's own flag)
    assert (spec.injection is None) == (spec.manual is not None), spec.id
    assert spec.not_injectable() == spec.manual
    assert all(a in FIXES and a != spec.id for a in (*spec.alternatives, *spec.follows))
    if spec.own_flag is not None:
        assert spec.settings, "what a loop fix changes, in settings"


def test_every_fix_module_is_in_the_explicit_list_once() -> None:
    modules = [
        m.name
        for m in pkgutil.walk_packages(advisors.fixes.__path__, "advisors.fixes.")
        if not m.ispkg
    ]
    defined = [
        importlib.import_module(m).FIX
        for m in modules
        if hasattr(importlib.import_module(m), "FIX")
    ]
    assert sorted(s.id for s in defined) == sorted(s.id for s in REGISTRY)
    assert len({s.id for s in REGISTRY}) == len(REGISTRY)


def test_every_fix_a_rule_proposes_is_registered() -> None:
    proposed = {r.fix_id for r in RULES} | {
        e.fix for r in RULES for e in r.fires if e.fix is not NOT_STATED
    }
    assert proposed - {None} <= set(FIXES)


#: fix ids that are also the name of a setting or knob (``pin_memory``, ``cache_decoded``): a table of knobs is no
#: table of fixes
KNOB_NAMES = {k for s in REGISTRY for k in s.settings} | set(KNOBS)


def _fix_keyed_tables(path: Path) -> list[int]:
    """Lines of dict literals in ``path`` with two or more fix ids (that are no knob's name) as keys."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    ids = set(FIXES) - KNOB_NAMES
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Dict)
        and sum(isinstance(k, ast.Constant) and k.value in ids for k in n.keys) >= 2
    ]


def test_no_other_module_keeps_a_table_keyed_by_fix_id() -> None:
    """A rule's sentence for the lever it picked (``advisors/rules/``) is the finding's wording, not the fix's."""
    found = [
        f"{p.relative_to(REPO)}:{line}"
        for top in (
            "advisors",
            "app",
            "cli",
            "reports",
            "profilers",
            "sample_runs",
            "stepwise_agent",
        )
        for p in sorted((REPO / top).rglob("*.py"))
        if p.relative_to(REPO).parts[:2] not in (("advisors", "fixes"), ("advisors", "rules"))
        for line in _fix_keyed_tables(p)
    ]
    assert not found, (
        f"a second table keyed by fix id (define it on each fix in advisors/fixes/): {found}"
    )


def test_the_table_check_finds_the_old_tables(tmp_path: Path) -> None:
    """The check above can fail: the tables this registry replaced are found."""
    old = tmp_path / "old.py"
    old.write_text(
        'EFFORT = {"dataloader_workers": 0, "fused_optimizer": 0}\n'
        'INJECTIONS = {"bf16_autocast": 1, "torch_compile": 2}\nKNOBS = {"pin_memory": 1, "tf32": 2}\n'
    )
    assert _fix_keyed_tables(old) == [1, 2]
