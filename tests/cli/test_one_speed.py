"""One speed per run: its time per step is its timed steps' elapsed time over their count, so
ms/step × samples/s is the batch on every surface, and ``compare`` judges that time per step, as an
Apply judges samples/s. The median step is the *typical step*, beside it.

The walk that filed this read, on a loop whose loader stalls on every 8th batch, ``launch --json``
2.5 ms/step beside 1,995 samples/s (2.5 ms would be 13,000), and Compare "3.96× faster" where the
Apply said "0.26× slower".
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from cli.advisors import main as advisors_main
from profilers.run.records import summarise_steps
from profilers.store.runs import RunStore
from stepwise_agent import steady
from tests.app.fake_runs import fake_run

REPO = Path(__file__).resolve().parents[2]
BATCH = 16
WAIT_S = 300  # an upper bound for a stuck launch, not a timing assertion


def bursty_rows(fast_ms: float, stall_ms: float, every: int = 8, steps: int = 41) -> list[dict]:
    """A loader that stalls on every ``every``-th batch: ``stall_ms`` there, ``fast_ms`` elsewhere;
    step 0 (the warm-up) apart."""
    return [
        {
            "rank": 0,
            "step": i,
            "wall_ms": stall_ms if i and i % every == 0 else fast_ms,
            "samples": BATCH,
            "profiled": False,
            "loss": 1.0,
        }
        for i in range(steps)
    ]


def test_a_bursty_loaders_time_per_step_implies_its_samples_per_s() -> None:
    s = summarise_steps(pd.DataFrame(bursty_rows(2.0, 40.0)), pd.DataFrame(), warmup_steps=1)
    assert s.step_time_ms is not None and s.samples_per_s is not None
    assert s.step_time_ms == pytest.approx((35 * 2.0 + 5 * 40.0) / 40)  # elapsed ÷ steps: 6.75 ms
    assert s.step_time_ms * s.samples_per_s / 1e3 == pytest.approx(BATCH)  # × samples/s: the batch
    assert s.typical_step_ms == 2.0 and s.stalled_share == pytest.approx(5 / 40)
    said = steady.typical_note(s.step_time_ms, s.typical_step_ms, s.stalled_share)
    assert said == "typical step (median) 2 ms, 12% of steps stalled"
    even = summarise_steps(pd.DataFrame(bursty_rows(2.0, 2.1)), pd.DataFrame(), warmup_steps=1)
    assert steady.typical_note(even.step_time_ms, even.typical_step_ms, 0.0) == ""  # within 10%


def _stalled_run(store: RunStore, label: str, stall_ms: float) -> str:
    """A stored run whose steps are those of :func:`bursty_rows` (fast steps of 10 ms, one stall in
    8)."""
    record = fake_run(store, label, steps=41, step_ms=10.0)
    rows = bursty_rows(10.0, stall_ms)
    (Path(record.run_dir) / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return record.run_dir


def test_compare_judges_the_stalls_as_the_throughput_does(tmp_path: Path, capsys) -> None:
    """Equal fast steps, stalls of 100 ms against 300 ms: the medians are equal (10 ms), the runs
    are not."""
    store = RunStore(tmp_path / "runs")
    base, new = _stalled_run(store, "stall 100", 100.0), _stalled_run(store, "stall 300", 300.0)
    code = advisors_main(["compare", base, new, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["verdict"] == "regression", doc["reason"]
    n = doc["base"]["steps"]  # the steps past the run's warm-up, the same on both sides
    assert n == doc["new"]["steps"] and n >= 30
    rate = {
        k: steady.samples_per_s([BATCH] * n, [r["wall_ms"] for r in bursty_rows(10.0, ms)[-n:]])
        for k, ms in (("base", 100.0), ("new", 300.0))
    }
    slowdown = rate["base"] / rate["new"]  # how much longer NEW takes per sample
    assert doc["ratio"] == pytest.approx(slowdown, rel=0.2) and doc["interval"][0] > 1
    for side in ("base", "new"):
        assert doc[side]["typical_step_ms"] == 10.0
        assert doc[side]["stalled_share"] == pytest.approx(5 / n, abs=1e-4)
        assert doc[side]["step_time_ms"] * rate[side] / 1e3 == pytest.approx(BATCH, rel=1e-3)
    assert advisors_main(["compare", base, new]) == 1
    text = capsys.readouterr().out
    assert f"typical step (median) 10 ms, {5 / n:.0%} of steps stalled" in text


BURSTY = textwrap.dedent('''
    import time, torch
    from torch.utils.data import DataLoader, Dataset

    class Bursty(Dataset):
        """Every 8th batch of 16 takes 40 ms more to draw (a loader that stalls), the rest are
        instant."""
        def __len__(self):
            return 16 * 400
        def __getitem__(self, i):
            if i % 16 == 0 and (i // 16) % 8 == 7:
                time.sleep(0.04)
            return torch.randn(8), torch.tensor(i % 2)

    loader = DataLoader(Bursty(), batch_size=16, shuffle=False, num_workers=0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for xb, yb in loader:
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
        opt.zero_grad()
''')


@pytest.mark.slow
def test_launch_and_analyze_say_one_ms_per_step_implying_the_samples_per_s(tmp_path: Path) -> None:
    """A real launched script whose loader stalls on every 8th batch."""
    (tmp_path / "train.py").write_text(BURSTY)
    store = str(tmp_path / "store")
    argv = ["launch", "--steps", "33", "--json", "--store", store, "--", sys.executable, "train.py"]
    done = subprocess.run(
        [sys.executable, "-m", "profilers", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    ms, rate = run["step_time_ms"], run["samples_per_s"]
    assert ms and rate, run
    assert BATCH / ms * 1e3 == pytest.approx(rate, rel=0.1)  # the ms/step implies the samples/s
    # the stalls: in the time per step only
    assert run["typical_step_ms"] < ms and run["stalled_share"] > 0
    analyse = [sys.executable, "-m", "advisors", "analyze", run["run_dir"], "--json"]
    analysed = subprocess.run(analyse, cwd=REPO, capture_output=True, text=True, timeout=WAIT_S)
    assert analysed.returncode == 0, analysed.stderr
    doc = json.loads(analysed.stdout)
    assert doc["step_time_ms"] == pytest.approx(ms, rel=1e-3)
    assert doc["run"]["step_time_ms"] == pytest.approx(ms)
    assert doc["run"]["typical_step_ms"] == pytest.approx(run["typical_step_ms"])
