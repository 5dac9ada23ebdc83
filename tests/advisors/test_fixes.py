"""The fix catalog: complete entries, patches that make valid specs, relative values, advice-only fixes."""

from __future__ import annotations

import pytest

from advisors.fixes import FIXES, applies, patched, resolve_patch
from advisors.rules import RULES
from profilers.errors import SpecError
from profilers.run.spec import TrainingSpec

BASE = TrainingSpec(workload="gpt_small", batch_size=32, world_size=2)


@pytest.mark.parametrize("fix_id", sorted(FIXES))
def test_fix_is_complete_and_patches_a_valid_spec(fix_id: str) -> None:
    fix = FIXES[fix_id]
    assert fix.title and fix.snippet and fix.explanation
    if fix.spec_patch:
        new = patched(BASE, fix)
        assert new != BASE and BASE.describe_diff(new)
    else:
        with pytest.raises(SpecError, match="advice only"):
            patched(BASE, fix)
    assert fix.to_json()["id"] == fix_id


def test_relative_values_resolve() -> None:
    assert resolve_patch(BASE, FIXES["grad_accumulation"]) == {"grad_accum_steps": 2}
    no_sync = resolve_patch(BASE, FIXES["ddp_no_sync"])
    assert no_sync == {"ddp_no_sync": True, "grad_accum_steps": 4, "batch_size": 128}
    assert patched(BASE, FIXES["ddp_no_sync"]).batch_size // 4 == BASE.batch_size  # same micro-batch
    assert resolve_patch(BASE, FIXES["dataloader_workers"])["num_workers"] >= 2


@pytest.mark.parametrize("fix_id", ["dataloader_workers", "prefetch_pinned"])
def test_the_data_fixes_pin_memory_only_where_there_is_a_gpu(fix_id: str) -> None:
    """Issue 42: the spec change proposed pin_memory = True on a machine without a GPU, where it does nothing."""
    on_cpu = resolve_patch(BASE.patch(device="cpu"), FIXES[fix_id])
    assert "pin_memory" not in on_cpu and on_cpu["num_workers"] >= 2
    assert "pin_memory" not in resolve_patch(BASE, FIXES[fix_id], device="cpu")  # the run's device decides
    assert resolve_patch(BASE, FIXES[fix_id], device="cuda")["pin_memory"] is True
    assert resolve_patch(BASE.patch(device="cuda"), FIXES[fix_id])["pin_memory"] is True
    assert "pin_memory=torch.cuda.is_available()" in FIXES[fix_id].snippet  # the code to write, either way


def test_applies_by_device_and_ranks() -> None:
    assert applies(FIXES["cuda_graphs"], "cpu", 1)
    assert applies(FIXES["cuda_graphs"], "cuda", 1) is None
    assert applies(FIXES["ddp_no_sync"], "cpu", 1)
    assert applies(FIXES["bf16_autocast"], "cpu", 1) is None


def test_every_rule_fix_exists() -> None:
    for rule in RULES:
        assert rule.fix_id is None or rule.fix_id in FIXES
