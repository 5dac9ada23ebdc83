"""What a fix changes, in settings, on the run's device; where each applies."""

from __future__ import annotations

import pytest

from advisors.fixes import FIXES, applies, settings_for


@pytest.mark.parametrize("fix_id", ["dataloader_workers", "prefetch_pinned"])
def test_the_data_fixes_pin_memory_only_where_there_is_a_gpu(fix_id: str) -> None:
    """Issue 42: the spec change proposed pin_memory = True on a machine without a GPU, where it does nothing."""
    assert "pin_memory" not in settings_for(FIXES[fix_id], "cpu") and "num_workers" in settings_for(
        FIXES[fix_id], "cpu"
    )
    assert settings_for(FIXES[fix_id], "cuda")["pin_memory"] is True
    assert (
        settings_for(FIXES[fix_id], None)["pin_memory"] is True
    )  # a device not known: the fix as written
    assert (
        "pin_memory=torch.cuda.is_available()" in FIXES[fix_id].snippet
    )  # the code to write, either way


def test_applies_by_device_and_ranks() -> None:
    assert applies(FIXES["cuda_graphs"], "cpu", 1)
    assert applies(FIXES["cuda_graphs"], "cuda", 1) is None
    assert applies(FIXES["ddp_no_sync"], "cpu", 1)
    assert applies(FIXES["bf16_autocast"], "cpu", 1) is None
