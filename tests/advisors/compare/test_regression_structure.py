"""The gate reads structure and says ``inconclusive`` when it cannot tell: a category that moved in
every step decides where two outlier steps widened the interval of the times per step; a contended
pair is answered ``inconclusive`` with exit code 3 — on hand-made traces and run folders whose
answers are known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisors.compare.regression import EXIT_INCONCLUSIVE, check, check_json
from advisors.compare.sides import observe_side
from advisors.compare.structure import MIN_STRUCTURE_STEPS
from cli.advisors import main
from profilers.store.runs import RunStore
from tests.app.fake_runs import fake_run
from tests.trace_factory import kernel, step, write, x

LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
# BASE: two outlier steps (a hiccup in the kernels)
COMPUTE_MS = (131.0, 130.2, 190.0, 131.5, 130.8, 190.8)
NEW_COMPUTE_MS = (130.6, 131.3, 130.1, 131.8, 130.4, 131.0)


def _trace(path: Path, compute_ms: tuple[float, ...], loader_ms: tuple[float, ...]) -> Path:
    """One GPU rank, one step per entry: the DataLoader's wait on the host, then the step's kernels."""
    events, t = [], 0.0
    for i, (c, ld) in enumerate(zip(compute_ms, loader_ms)):
        us_c, us_l = c * 1000, ld * 1000
        events += [
            step(i, t, us_l + us_c + 50),
            x(LOADER, t + 5, us_l),
            x("cudaLaunchKernel", t + us_l + 10, 5, cat="cuda_runtime", correlation=i + 1),
            kernel("sm90_xmma_gemm_bf16bf16_bf16f32", t + us_l + 20, us_c, correlation=i + 1),
        ]
        t += us_l + us_c + 50
    return write(path, events)


@pytest.fixture()
def loader_pair(tmp_path: Path):
    """DataLoader workers 4 (BASE: ~1 ms of loader wait a step) against 0 (NEW: ~30 ms, +29 ms every step)."""
    base = _trace(tmp_path / "workers4.json", COMPUTE_MS, (1.1, 0.9, 1.0, 1.2, 0.8, 1.0))
    new = _trace(tmp_path / "workers0.json", NEW_COMPUTE_MS, (30.2, 29.7, 30.5, 29.9, 30.1, 30.3))
    return observe_side(base, "workers=4"), observe_side(new, "workers=0")


def test_a_loader_grown_in_every_step_is_a_regression_despite_outliers_in_base(loader_pair) -> None:
    base, new = loader_pair
    c = check(base, new)
    assert base.steps == new.steps == 6
    # NEW's time per step ~6% longer (BASE's outliers count: they took time)
    assert 1.05 < c.ratio < 1.08
    assert c.estimate is not None and c.estimate.low <= 1  # the interval alone cannot show it ...
    assert c.verdict == "regression" and c.exit_code == 1, c.reason
    assert c.decided_by == ("categories",)  # ... the loader's time in every step does
    doc = check_json(c)
    (moved,) = doc["evidence"]["categories"]
    assert moved["name"] == "dataloader" and moved["steps_moved"] == moved["steps"] == 6
    assert 28 < moved["delta_ms"] < 30 and moved["spread_ms"] < 1
    assert doc["evidence"]["decided_by"] == ["categories"]
    assert "shown by dataloader's median +29" in c.reason and "in 6 of 6 steps" in c.reason
    json.dumps(doc)


def test_swapped_the_same_structure_is_an_improvement(loader_pair) -> None:
    base, new = loader_pair
    c = check(new, base)
    assert c.verdict == "improvement" and c.decided_by == ("categories",) and c.exit_code == 0, (
        c.reason
    )


def test_without_a_category_that_moved_in_every_step_the_outliers_leave_it_inconclusive(
    tmp_path: Path,
) -> None:
    """NEW's extra time lands in four of its six steps only: no structure, and the interval includes
    no change — neither a regression nor "the same"."""
    base = observe_side(_trace(tmp_path / "a.json", COMPUTE_MS, (1.0,) * 6))
    half = (175.0, 131.0, 176.0, 130.5, 177.0, 176.5)
    new = observe_side(_trace(tmp_path / "b.json", half, (1.0,) * 6))
    c = check(base, new)
    assert c.ratio > 1.05 and c.estimate is not None and c.estimate.low <= 1
    assert c.structure is not None and not c.structure.decisive
    assert c.verdict == "inconclusive" and c.exit_code == EXIT_INCONCLUSIVE and c.decided_by == ()
    assert "smallest slowdown the interval could tell" in c.reason


def test_structure_needs_enough_steps(tmp_path: Path) -> None:
    n = MIN_STRUCTURE_STEPS - 1
    base = observe_side(_trace(tmp_path / "a.json", COMPUTE_MS[:n], (1.0,) * n))
    new = observe_side(_trace(tmp_path / "b.json", NEW_COMPUTE_MS[:n], (30.0,) * n))
    c = check(base, new)
    assert c.structure is not None and c.structure.moves == ()
    assert "categories" not in c.decided_by


def test_a_small_consistent_move_is_not_a_regression(tmp_path: Path) -> None:
    """A category that moved in every step, but by less than the tolerance of the step: real, not a regression."""
    base = observe_side(_trace(tmp_path / "a.json", (130.0,) * 6, (1.0, 1.1, 0.9, 1.0, 1.05, 0.95)))
    new = observe_side(_trace(tmp_path / "b.json", (130.0,) * 6, (4.0, 4.1, 3.9, 4.0, 4.05, 3.95)))
    c = check(base, new)
    assert c.structure is not None and [m.name for m in c.structure.moves] == ["dataloader"]
    assert not c.structure.decisive and c.verdict == "same"
    assert "smallest slowdown the interval could tell from their noise" in c.reason  # 6 steps: few


# -- contention: inconclusive, with its exit code -------------------------------------------------------------
def _contended(run_dir: str, process_cores: float, busy_cores: float) -> None:
    """Rewrite a fake run's telemetry: the machine's 2 cores, ``busy_cores`` of them busy, ``process_cores``
    used by the run's process tree."""
    path = Path(run_dir) / "telemetry.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for r in rows:
        r.update(cpu_pct=100 * process_cores, system_cpu_pct=100 * busy_cores / 2, cpu_count=2)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_contended_pair_is_inconclusive_with_exit_code_3(tmp_path: Path, capsys) -> None:
    """Times per step 2.2x apart, their interval far from 1, but others took 1.74 of the 2 cores
    during NEW and its process got 0.13 (BASE's used 1.29): the change cannot be told from the
    competition."""
    store = RunStore(tmp_path / "runs")
    base, new = fake_run(store, "base", step_ms=50.0), fake_run(store, "new", step_ms=110.0)
    _contended(base.run_dir, 1.29, 1.35)
    _contended(new.run_dir, 0.13, 1.87)
    code = main(["compare", base.run_dir, new.run_dir, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == EXIT_INCONCLUSIVE == 3
    assert doc["verdict"] == "inconclusive" and doc["ratio"] > 2 and doc["interval"][0] > 1.5
    assert (
        doc["contention"]["suspected"] is True and doc["contention"]["new"]["other_cores"] == 1.74
    )
    assert "cannot be told from the competition" in doc["reason"]
    code = main(["compare", base.run_dir, new.run_dir])
    assert code == 3 and capsys.readouterr().out.startswith(
        "inconclusive: NEW's time per step takes"
    )
