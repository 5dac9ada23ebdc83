"""The regression gate on real tiny runs (slow): runs of one spec read ``same`` (no false alarm in 5 pairs), a run
slowed through a spec knob reads ``regression``, and the CI recipe of docs/how-to/gate-ci.md works end to end.

The runs use one intra-op thread (``OMP_NUM_THREADS=1``, as ``torch.utils.benchmark`` times by default): on this
shared 2-core machine a 2-thread matmul slows as soon as another program takes a core, while a 1-thread one mostly
keeps its pace with another program on the other core (not always: see below; the figures are in
``benchmarks/results/contention-2026-11-23.md``). Heavier competition is left to the gate's contention guard
(``advisors.compare.contention``), which answers ``inconclusive`` (exit 3) and says so: a pair it suspects is
retried (at most :data:`ATTEMPTS` times), exactly as its reason tells a CI user to do. ``inconclusive`` is never a
false alarm: on runs of one spec the tests accept it where its evidence holds (contention, or an interval that
includes no change), never ``regression`` or ``improvement``.

What neither sees: the per-process offset of a run (where its buffers landed, the host's clocks), and another
program on the *other* core, which slows a one-thread run through the caches and the core's shared parts while
it keeps its whole core. Pairs of one spec the guard did not suspect read 0.90-1.16, each run steady
within itself so that the interval excluded 1 (the series: ``benchmarks/results/contention-2026-11-23.md``).
Later series reached 0.69-1.32 for single pairs (same file), each process steady within itself (an offset
that belongs to the process, not to the moment), so a pair that reads otherwise is measured again with fresh
processes, up to :data:`ATTEMPTS` pairs, before the test judges the spec: the gate must not false-alarm
*persistently*. The gate's tolerance must sit above the usual offsets, as docs/how-to/gate-ci.md tells a CI user on a shared
runner: these tests gate at :data:`TOLERANCE` (the default 5 % is for a quiet, dedicated machine). The knob
quadruples the batch, well clear of the tolerance and the offsets (twice the batch measured 1.53-1.90x, too near a
35 % tolerance once a process offset of 0.8 falls on it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from advisors.compare.regression import RegressionCheck, check
from advisors.compare.sides import observe_side
from advisors.experiments.trials import script_runner
from cli.workloads import workload_spec
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore

REPO = Path(__file__).resolve().parents[3]
STEPS = (
    30  # 3 warm-up, 1 + 3 profiled: 23 measured steps of ~35 ms, ~7 s a run with the process start
)
PAIRS = 5
ATTEMPTS = 3
SLOWER_BATCH = 512  # compute_bound tiny trains 128 samples a step: four times the work per step
TOLERANCE = 0.35  # above all but one of the run-to-run offsets measured on this shared machine (module docs)


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def _spec(store: RunStore, **values) -> ScriptSpec:  # type: ignore[no-untyped-def]
    return workload_spec(store.root, "compute_bound", values=values, steps=STEPS)


def _pair(store: RunStore, base: ScriptSpec, new: ScriptSpec) -> RegressionCheck:
    run = script_runner(store, timeout_s=300)
    a, b = run(base), run(new)
    assert a.status == b.status == "ok", (a.error, b.error)
    return check(observe_side(a.run_dir, "base"), observe_side(b.run_dir, "new"), TOLERANCE)  # type: ignore[arg-type]


def _seen(c: RegressionCheck) -> str:
    cpu = [
        (round(s.cpu.ours, 2), round(s.cpu.others, 2)) if s.cpu else None for s in (c.base, c.new)
    ]
    return f"{c.verdict} {c.ratio:.3f} {c.estimate and (round(c.estimate.low, 3), round(c.estimate.high, 3))} {cpu}"


@pytest.mark.slow
@pytest.mark.timed
def test_runs_of_one_spec_read_same_every_time(tmp_path: Path) -> None:
    """A pair that reads otherwise is measured again with two fresh processes, up to :data:`ATTEMPTS` pairs (the
    per-process offset belongs to the process, not the code; series on this machine reached 0.69-1.32, see the
    module docs): every attempt of a spec must read otherwise for the test to fail."""
    store = RunStore(tmp_path / "runs")
    seen, final = [], []
    for _ in range(PAIRS):
        for _attempt in range(ATTEMPTS):
            c = _pair(store, _spec(store), _spec(store))
            seen.append(c)
            if c.verdict == "same":
                break
        final.append(c)
    print("same spec:", "; ".join(_seen(c) for c in seen))
    assert all(c.verdict == "same" or _open(c) for c in final), [c.reason for c in seen]


def _open(c: RegressionCheck) -> bool:
    """An ``inconclusive`` whose evidence holds: the machine was contended, or the interval includes no change."""
    est = c.estimate
    return c.verdict == "inconclusive" and (c.contended or est is None or est.low <= 1 <= est.high)


@pytest.mark.slow
@pytest.mark.timed
def test_a_run_slowed_through_a_spec_knob_is_a_regression(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    seen = []
    for _ in range(ATTEMPTS):
        c = _pair(store, _spec(store), _spec(store, batch_size=SLOWER_BATCH))
        seen.append(c)
        assert c.verdict in ("regression", "inconclusive"), (
            c.reason
        )  # never "same" or "improvement"
        if c.verdict == "regression":
            break
    print("slowed:", "; ".join(_seen(c) for c in seen))
    assert c.verdict == "regression", [x.reason for x in seen]
    assert c.ratio > 1 + TOLERANCE and c.estimate is not None and c.estimate.low > 1.1
    assert c.movers.largest is not None and c.movers.largest.name in (
        "forward",
        "backward",
        "optimizer",
    )
    assert c.movers.largest.delta_ms > 0


TRAIN = textwrap.dedent('''
    """A user's training script, unmodified: its width is the change under test."""
    import sys, torch
    from torch.utils.data import DataLoader, TensorDataset
    width = int(sys.argv[1])
    x, y = torch.randn(4096, 256), torch.randint(0, 10, (4096,))
    loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.GELU(), torch.nn.Linear(width, width),
                                torch.nn.GELU(), torch.nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(100):
        for xb, yb in loader:
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
''')


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def _launch(script: Path, store: Path, width: int) -> str:
    done = _cli(
        "profilers",
        "launch",
        "--steps",
        "20",
        "--json",
        "--store",
        str(store),
        "--",
        "python",
        str(script),
        str(width),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["run_dir"]


@pytest.mark.slow
@pytest.mark.timed
def test_the_readme_ci_recipe(tmp_path: Path) -> None:
    """Pin a launched run of the script as the baseline, then gate later runs against it: the same script
    passes (exit 0), the script at twice the width (about 3.6x the multiply-adds a step) fails (exit 1). Steps of ~20 ms: 5 ms steps
    swung so much within a launch that a 1.33x slowdown stayed inside the interval."""
    script, store = tmp_path / "train.py", tmp_path / "runs"
    script.write_text(TRAIN)
    pinned = _cli(
        "advisors",
        "compare",
        "--save-baseline",
        "main",
        _launch(script, store, 1024),
        "--store",
        str(store),
    )
    assert pinned.returncode == 0 and pinned.stdout.startswith("pinned baseline main"), (
        pinned.stderr
    )

    gate = ("--store", str(store), "--json", "--max-slowdown", str(100 * TOLERANCE))
    for _ in range(
        ATTEMPTS
    ):  # a fresh process again: a per-process offset, as in the same-spec test
        same = _cli("advisors", "compare", "baseline:main", _launch(script, store, 1024), *gate)
        if same.returncode == 0:
            break
    # exit 3 (inconclusive) only when a busy machine left every attempt open; never 1
    assert same.returncode in (0, 3), same.stdout + same.stderr
    assert json.loads(same.stdout)["verdict"] == (
        "same" if same.returncode == 0 else "inconclusive"
    )

    for _ in range(ATTEMPTS):
        slower = _cli("advisors", "compare", "baseline:main", _launch(script, store, 2048), *gate)
        doc = json.loads(slower.stdout)
        assert slower.returncode in (1, 3), doc["reason"]  # never "same"
        if slower.returncode == 1:
            break
    assert (
        slower.returncode == 1 and doc["verdict"] == "regression" and doc["ratio"] > 1 + TOLERANCE
    ), doc["reason"]
