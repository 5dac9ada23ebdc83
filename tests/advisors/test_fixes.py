"""The fix catalog: complete entries, what each changes, where each applies; every one reaches a script as
injection, as the script's own flag, or as advice."""

from __future__ import annotations

import pytest

from advisors.experiments.script_fixes import INJECTIONS, NOT_INJECTABLE, OWN_FLAGS
from advisors.fixes import FIXES, applies
from advisors.rules import RULES


@pytest.mark.parametrize("fix_id", sorted(FIXES))
def test_fix_is_complete_and_reaches_a_script_one_way_or_another(fix_id: str) -> None:
    fix = FIXES[fix_id]
    assert fix.title and fix.snippet and fix.explanation
    assert fix.to_json()["id"] == fix_id
    # injected at boot, or (a loop fix) the script's own flag, or said as the change to make
    assert fix_id in INJECTIONS or fix_id in NOT_INJECTABLE
    assert fix_id not in OWN_FLAGS or fix_id in NOT_INJECTABLE  # a flag, never an injection, for a loop fix
    if fix_id in OWN_FLAGS:
        assert fix.spec_patch  # what it changes, in settings


def test_applies_by_device_and_ranks() -> None:
    assert applies(FIXES["cuda_graphs"], "cpu", 1)
    assert applies(FIXES["cuda_graphs"], "cuda", 1) is None
    assert applies(FIXES["ddp_no_sync"], "cpu", 1)
    assert applies(FIXES["bf16_autocast"], "cpu", 1) is None


def test_every_rule_fix_exists() -> None:
    for rule in RULES:
        assert rule.fix_id is None or rule.fix_id in FIXES
