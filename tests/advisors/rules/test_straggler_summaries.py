"""A ``--trace-ranks`` run keeps the trace of one rank and every rank's summary: the straggler rule judges from
all the summaries, and the time it claims is the job's (the median rank's collective time), not the traced
rank's, which is the straggler itself and hardly waits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisors.accounting import regions
from advisors.diagnosis import diagnose
from advisors.facts import RankFigures, derive
from advisors.observation import observe
from advisors.verdict import Diagnosis, Finding

WORKER5 = (
    Path(__file__).resolve().parents[3].parent
    / "shared"
    / "traces"
    / "communication"
    / "param_dlrm_8_ranks"
    / "worker5.pt.trace.json.gz"
)  # its distributedInfo says rank 5


def _run(tmp_path: Path, work_us: dict[int, int], traced: int = 5, step_us: int = 18_000) -> Path:
    """A run folder as ``launch --trace-ranks`` leaves it: each rank's agent summary, one rank's trace."""
    run = tmp_path / "run"
    (run / "summaries").mkdir(parents=True)
    (run / "tb").mkdir()
    (run / "spec.json").write_text("{}")
    for rank, work in work_us.items():
        steps = [
            {"step": s, "step_us": step_us, "work_us": work, "comm_us": step_us - work}
            for s in range(3)
        ]
        (run / "summaries" / f"rank{rank}.json").write_text(
            json.dumps({"rank": rank, "steps": steps})
        )
    (run / "tb" / f"rank{traced}.host.pt.trace.json.gz").write_bytes(WORKER5.read_bytes())
    return run


def _all(d: Diagnosis) -> list[Finding]:
    return [f for lead in d.findings for f in (lead, *lead.related)]


def test_the_straggler_is_judged_from_every_rank_s_summary(tmp_path: Path) -> None:
    obs = observe(_run(tmp_path, {0: 8_000, 5: 15_000, 6: 8_000}))
    assert obs.breakdown is not None and obs.breakdown.ranks == (
        5,
    )  # one traced rank, three summaries
    facts = derive(obs)
    assert facts.n_ranks == 1 and [r.rank for r in facts.summary_ranks] == [0, 5, 6]
    d = diagnose(obs)
    # the traced rank's own exposed collectives (COMM001) share its cause and lead the group; the straggler is in it
    straggler = next(f for f in _all(d) if f.rule == "COMM003")
    excess = (
        15.0 - 8.0
    ) / 18.0  # the culprit's work beyond the median rank's, as a share of the median step
    assert straggler.evidence["straggler_rank"] == 5 and straggler.evidence["ranks_summarised"] == 3
    # not capped at the traced rank's own waits; read from the job's record (rounded to 4 places), never recomputed
    assert straggler.severity == pytest.approx(excess, abs=1e-4)
    assert (
        "across all 3 ranks' summaries" in straggler.message
        and "39% of the step" in straggler.message
    )
    assert d.bottleneck.value == "communication"
    assert not any("stragglers need the other ranks' traces" in n.reason for n in d.notes)


def test_balanced_summaries_raise_no_straggler(tmp_path: Path) -> None:
    d = diagnose(observe(_run(tmp_path, {0: 8_000, 5: 8_200, 6: 8_100})))
    assert not any(f.rule == "COMM003" for f in _all(d))


def test_without_the_summaries_one_traced_rank_cannot_name_a_straggler(tmp_path: Path) -> None:
    run = _run(tmp_path, {0: 8_000, 5: 15_000})
    with_summaries = observe(run)
    for p in (run / "summaries").iterdir():
        p.unlink()
    obs = observe(run)  # the trace alone
    d = diagnose(obs)
    assert not any(f.rule == "COMM003" for f in _all(d))
    from advisors.rules.communication.straggler import Straggler

    assert (
        Straggler().missing(derive(obs))
        == "one rank in the trace: stragglers need the other ranks' traces too"
    )
    assert Straggler().missing(derive(with_summaries)) is None


def test_the_collectives_region_is_the_median_rank_s_when_the_summaries_see_more_ranks() -> None:
    from advisors.facts import Facts

    alone = Facts(
        has_steps=True, device="cpu", n_ranks=1, shares={"communication": 0.02, "other": 0.9}
    )
    job = [
        RankFigures(0, 20.0, 2.0, 18.0),
        RankFigures(1, 20.0, 19.0, 1.0),
        RankFigures(2, 20.0, 4.0, 16.0),
    ]
    assert regions(alone)["collectives"] == pytest.approx(0.02)
    from dataclasses import replace

    assert regions(replace(alone, summary_ranks=tuple(job)))["collectives"] == pytest.approx(
        16.0 / 20.0
    )
    assert regions(replace(alone, n_ranks=3, summary_ranks=tuple(job)))[
        "collectives"
    ] == pytest.approx(0.02)


def test_a_malformed_summary_is_left_out_not_a_crash(tmp_path: Path) -> None:
    """A summary edited by hand or cut short: the run is still analysed, from the ranks whose summaries hold."""
    from cli.advisors import analyze

    run = _run(tmp_path, {0: 8_000, 5: 15_000, 6: 8_000})
    bad = {"rank": 6, "steps": [{"step": "ten", "step_us": 1, "work_us": 1, "comm_us": 0}]}
    (run / "summaries" / "rank6.json").write_text(json.dumps(bad))
    (run / "summaries" / "rank7.json").write_text(
        '{"rank": 7, "steps": [{"step": 1, "step_us": NaN, "work_us": 1, "comm_us": 0}]}'
    )
    (run / "summaries" / "rank8.json").write_text('{"rank": 8, "steps": [')  # cut short
    out = analyze(str(run))
    assert out["job"]["ranks"] == [0, 5] and out["job"]["straggler"]["culprit"] == 5
