"""The script's own seeding calls get the to-quality seed's offset, and the run records which it changed."""

from __future__ import annotations

import random
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from stepwise_agent.seeding import ENV, FILE, SeedOffsets, install_if_asked
from profilers.store.files import read_json


def _draws(offset: int, run_dir: Path) -> tuple[float, float, float, dict]:
    seeds = SeedOffsets(offset, run_dir)
    seeds.install()
    try:
        torch.manual_seed(0)  # the script pins its seeds, as most do
        random.seed(0)
        np.random.seed(0)
        return (
            torch.rand(1).item(),
            random.random(),
            float(np.random.rand()),
            read_json(run_dir / FILE),
        )
    finally:
        seeds.uninstall()


def test_a_pinned_seed_differs_per_offset_and_seed_0_is_the_scripts_own(tmp_path: Path) -> None:
    runs = [_draws(k, tmp_path) for k in range(3)]
    for i in range(
        3
    ):  # three different streams from the same torch.manual_seed(0), random.seed(0), np.random.seed(0)
        assert len({r[i] for r in runs}) == 3
    torch.manual_seed(0)
    assert runs[0][0] == torch.rand(1).item()  # offset 0: the script's own seed
    record = runs[2][3]
    assert record["offset"] == 2 and record["calls"] == 3
    assert [(c["call"], c["asked"], c["used"]) for c in record["changed"]] == [
        ("torch.manual_seed", 0, 2),
        ("random.seed", 0, 2),
        ("numpy.random.seed", 0, 2),
    ]
    assert all(c["site"].startswith("test_seed_offsets.py:") for c in record["changed"])


def test_uninstall_puts_the_originals_back_and_a_clock_seed_is_left_alone(tmp_path: Path) -> None:
    before = (torch.manual_seed, random.seed, np.random.seed)
    seeds = SeedOffsets(5, tmp_path)
    seeds.install()
    random.seed()  # from the clock: nothing to offset
    assert seeds.calls == 0
    seeds.uninstall()
    assert (torch.manual_seed, random.seed, np.random.seed) == before


def test_a_library_seed_everything_is_offset_once_not_per_inner_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``seed_everything`` seeds torch itself: the outer call carries the offset, the inner one passes through."""
    seen: list[int] = []

    def seed_everything(seed: int) -> int:
        torch.manual_seed(seed)
        seen.append(torch.initial_seed())
        return seed

    module = types.ModuleType("lightning_fabric.utilities.seed")
    module.seed_everything = seed_everything  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lightning_fabric.utilities.seed", module)
    seeds = SeedOffsets(3, tmp_path)
    seeds.install()
    try:
        assert module.seed_everything(42) == 45  # type: ignore[attr-defined]
    finally:
        seeds.uninstall()
    assert seen == [45] and [c["call"] for c in seeds.changed] == ["lightning.seed_everything"]


def test_nothing_is_installed_without_the_launchers_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert install_if_asked(tmp_path, True) is None and not (tmp_path / FILE).exists()
    monkeypatch.setenv(ENV, "not a number")
    assert install_if_asked(tmp_path, True) is None
