"""Time at stake counted once: findings group by cause and claim their severity from the step's regions
(advisors.accounting), so the loader's idle time is never host time too, one cause is one finding, and every
finding carries the most its fix could gain (``upper_bound_speedup``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisors.accounting import CAUSES, REGIONS, regions
from cli.advisors import main
from advisors.diagnosis import diagnose, upper_bound_for
from advisors.facts import derive
from advisors.verdict import OUTSIDE_STEP, Bottleneck
from advisors.observation import observe
from advisors.rules import RULES
from advisors.synthetic import observation
from tests.trace_factory import kernel, step, write, x

STEP_US = 10_000.0
LABELLED = ("data", "compute", "memory", "communication", "host")


def _loader_bound_trace(path: Path) -> Path:
    """GPU busy 40% in short kernels, idle 45% of the step inside a single-process DataLoader, and 300
    ``.item()`` syncs per step: the syncs' own estimate (300 × 20 µs = 60% of the step) is larger than the
    loader's wait, but only 15% of the step is GPU idle that no loader wait covers."""
    ev: list[dict] = []
    for i in range(3):
        t = i * STEP_US
        ev += [
            step(i, t, STEP_US),
            x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 10, 4_500),
        ]
        ev += [
            kernel(
                "void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>",
                t + 4_600 + k * 100,
                40,
            )
            for k in range(50)
        ]
        ev += [x("aten::_local_scalar_dense", t + 4_600 + k * 15, 5) for k in range(300)]
        ev += [kernel("volta_sgemm_128x64_nn", t + 9_700, 200)]
    return write(path, ev)


def test_gpu_idle_covered_by_loader_waits_is_data_not_host(tmp_path: Path) -> None:
    obs = observe(_loader_bound_trace(tmp_path / "t.pt.trace.json"))
    f = derive(obs)
    assert f.loader_exposed == pytest.approx(0.45, abs=0.01) and f.syncs_per_step == 300
    raw = {r.id: r().evaluate(f) for r in RULES}
    assert (
        raw["HOST002"] is not None and raw["HOST002"].severity > f.loader_exposed
    )  # what used to bind
    d = diagnose(obs)
    assert d.bottleneck is Bottleneck.DATA, [(g.rule, g.severity, g.estimate) for g in d.findings]
    host = next(g for g in d.findings if g.bottleneck is Bottleneck.HOST)
    assert host.region == "host" and host.severity <= d.regions["host"] + 1e-6
    assert (
        host.estimate is not None and host.estimate > host.severity
    )  # its own estimate, capped and kept
    assert d.regions["loader"] == pytest.approx(0.45, abs=0.01)
    data = [
        g for g in d.findings if g.bottleneck is Bottleneck.DATA
    ]  # three loader rules, one finding
    assert len(data) == 1 and {m.rule for m in data[0].related} == {"DATA001", "DATA002"}


def test_one_finding_per_cause_lists_the_rules_that_saw_it(
    shared_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three data rules see the same 34% of loader wait: one finding, the other two listed with their evidence."""
    path = shared_traces / "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"
    assert main(["analyze", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    data = [f for f in out["findings"] if f["bottleneck"] == "data" and f["claims"] == "loader"]
    assert len(data) == 1
    lead = data[0]
    assert lead["rule"] == "DATA003" and {m["rule"] for m in lead["rules"]} == {
        "DATA001",
        "DATA002",
    }
    assert all(m["evidence"] and m["severity"] <= lead["severity"] for m in lead["rules"])
    assert (
        sum(f["severity"] for f in out["findings"] if f["claims"] == "loader")
        <= out["accounting"]["loader"] + 1e-6
    )


def test_a_saturated_device_takes_the_narrower_device_findings_into_its_group() -> None:
    """A saturated CPU with fp32 matmuls: COMP002 (the verdict) and COMP005 (the matmuls) propose the same
    fix on the same time: one finding, not the same advice twice."""
    d = diagnose(
        observation(
            {"forward": 0.3, "backward": 0.55, "optimizer": 0.1},
            device="cpu",
            cpu_matmul={"fp32": 0.75},
        )
    )
    assert d.bottleneck is Bottleneck.COMPUTE and len(d.findings) == 1
    assert (
        d.binding is not None
        and d.binding.rule == "COMP002"
        and [m.rule for m in d.binding.related] == ["COMP005"]
    )
    assert d.binding.fix_id == d.binding.related[0].fix_id == "bf16_autocast"


@pytest.mark.parametrize(
    "rel",
    [
        f"{label}/{p.name}"
        for label in LABELLED
        for p in sorted(
            (Path(__file__).resolve().parents[4] / "shared" / "traces" / label).glob("*")
        )
    ],
)
def test_no_microsecond_is_claimed_twice_on_real_traces(rel: str, shared_traces: Path) -> None:
    obs = observe(shared_traces / rel)
    d = diagnose(obs)
    total = regions(derive(obs))
    assert sum(total.values()) <= 1.0 + 1e-6
    for region in REGIONS:
        claimed = sum(g.severity for g in d.findings if g.region == region)
        assert claimed <= total[region] + 1e-6, (region, claimed, total[region])
    for g in d.findings:
        assert g.region in (*REGIONS, OUTSIDE_STEP)
        assert all(m.severity <= g.severity + 1e-9 for m in g.related)
        if g.region != OUTSIDE_STEP and g.severity < 1:
            # the whole time at stake: the severity, or the larger share a discounted rule names
            assert g.stake >= g.severity - 1e-9
            assert g.stake == g.severity or (g.estimate is None and g.at_stake == g.stake)
            assert g.upper_bound_speedup == pytest.approx(1 / (1 - g.stake), abs=1e-3)
    causes = [next(r.cause for r in RULES if r.id == g.rule) for g in d.findings]
    assert len(causes) == len(set(causes)), "one finding per cause"


def test_upper_bound_in_the_json(shared_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["analyze", str(shared_traces / "host/tracelens_h100_bert-small.json.gz"), "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    first = out["findings"][0]
    assert first["upper_bound_speedup"] == pytest.approx(1 / (1 - first["severity"]), abs=1e-3)
    assert first["upper_bound_speedup"] > 10  # 93% of the step at stake
    assert (
        main(
            [
                "analyze",
                str(shared_traces / "memory/cs336_memory_snapshot.pickle"),
                "--json",
                "--device-memory-gib",
                "14",
            ]
        )
        == 0
    )  # judged against a stated device (none: nothing binds)
    snap = json.loads(capsys.readouterr().out)["findings"][0]
    assert (
        snap["claims"] == OUTSIDE_STEP and snap["upper_bound_speedup"] is None
    )  # capacity is not step time


def test_upper_bound_for_a_fix_and_its_alternatives() -> None:
    d = diagnose(
        observation(
            {"gpu_compute": 0.5, "dataloader": 0.4},
            ops={"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0.41},
        )
    )
    assert upper_bound_for(d, "dataloader_workers") == pytest.approx(1 / 0.6, abs=1e-3)
    assert upper_bound_for(d, "prefetch_pinned") == pytest.approx(
        1 / 0.6, abs=1e-3
    )  # DATA002, same group
    assert upper_bound_for(d, "cache_decoded") == pytest.approx(
        1 / 0.6, abs=1e-3
    )  # an alternative lever
    assert (
        upper_bound_for(d, "ddp_no_sync") is None
    )  # nothing here proposes it, nor is it another lever
    # CUDA graphs have their own bound on any GPU step: its launch gaps (10% here, no loader wait) vanishing
    assert upper_bound_for(d, "cuda_graphs") == pytest.approx(1 / 0.9, abs=1e-3)


def test_every_cause_names_a_region_or_says_it_is_not_step_time() -> None:
    assert {r.cause for r in RULES} <= set(CAUSES)
    assert all(region in (*REGIONS, None) and why for region, why in CAUSES.values())
