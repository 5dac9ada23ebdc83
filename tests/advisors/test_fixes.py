"""The fix catalog: complete entries, what each changes, where each applies; every one reaches a script as
injection, as the script's own flag, or as advice."""

from __future__ import annotations

import pytest

from advisors.experiments.script_fixes import INJECTIONS, NOT_INJECTABLE, OWN_FLAGS
from advisors.fixes import FIXES, applies, settings_for
from advisors.rules import RULES


@pytest.mark.parametrize("fix_id", sorted(FIXES))
def test_fix_is_complete_and_reaches_a_script_one_way_or_another(fix_id: str) -> None:
    fix = FIXES[fix_id]
    assert fix.title and fix.snippet and fix.explanation
    assert fix.to_json()["id"] == fix_id
    # injected at boot, or (a loop fix) the script's own flag, or said as the change to make
    assert fix_id in INJECTIONS or fix_id in NOT_INJECTABLE
    assert not (fix_id in INJECTIONS and fix_id in NOT_INJECTABLE)  # one way or the other, never both
    if fix_id in OWN_FLAGS:
        assert fix.spec_patch  # what it changes, in settings


@pytest.mark.parametrize("fix_id", ["dataloader_workers", "prefetch_pinned"])
def test_the_data_fixes_pin_memory_only_where_there_is_a_gpu(fix_id: str) -> None:
    """Issue 42: the spec change proposed pin_memory = True on a machine without a GPU, where it does nothing."""
    assert "pin_memory" not in settings_for(FIXES[fix_id], "cpu") and "num_workers" in settings_for(FIXES[fix_id], "cpu")
    assert settings_for(FIXES[fix_id], "cuda")["pin_memory"] is True
    assert settings_for(FIXES[fix_id], None)["pin_memory"] is True  # a device not known: the fix as written
    assert "pin_memory=torch.cuda.is_available()" in FIXES[fix_id].snippet  # the code to write, either way


def test_applies_by_device_and_ranks() -> None:
    assert applies(FIXES["cuda_graphs"], "cpu", 1)
    assert applies(FIXES["cuda_graphs"], "cuda", 1) is None
    assert applies(FIXES["ddp_no_sync"], "cpu", 1)
    assert applies(FIXES["bf16_autocast"], "cpu", 1) is None


def test_every_rule_fix_exists() -> None:
    for rule in RULES:
        assert rule.fix_id is None or rule.fix_id in FIXES
