"""One DataLoader worker count per run: the finding's suggestion, the snippet the page shows and the
count an Apply trial injects are the same number, with its reason in words; a script asking for more
workers than its usable cores on a saturated host is told so, and never offered more."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisors.diagnosis import diagnose, diagnosis_json
from advisors.facts import Facts, derive
from advisors.fixes import FIXES, loader_numbers, plan_workers, spec_of
from advisors.fixes.context import ScriptContext
from advisors.fixes.data.workers import WORKERS_FORMULA, next_worker_count, with_workers
from advisors.rules.data.loader_exposed import LoaderStarvesStep
from advisors.rules.data.saturated_host import LoaderOnSaturatedHost
from advisors.rules.data.single_process import SingleProcessLoading
from advisors.synthetic import observation, run_facts
from profilers.run.run_config import RunConfig
from profilers.telemetry.summary import TelemetrySummary
from profilers.telemetry.threads import ThreadUse

_SINGLE = {"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0.4}


def _tel(cores: int, run_cores: float, affinity: int | None = None) -> TelemetrySummary:
    """Host telemetry of a run whose own processes kept ``run_cores`` of the machine's ``cores``
    busy."""
    return TelemetrySummary(
        source="host",
        samples=100,
        rate_hz=10.0,
        cpu_count=cores,
        process_cpu_pct=100 * run_cores,
        system_cpu_pct=100 * run_cores / cores,
        cpu_affinity=affinity,
    )


def _obs(tel: TelemetrySummary, workers: int, threads: ThreadUse | None = None):
    spec = RunConfig(workload="data_bound", num_workers=workers)
    ops = _SINGLE if workers == 0 else {}
    run = run_facts(telemetry=tel, spec=spec, threads=threads)
    return observation({"gpu_compute": 0.5, "dataloader": 0.4}, ops=ops, run=run)


def _ctx(f: Facts) -> ScriptContext:
    """The context a trial of the same run reads
    (advisors.experiments.script_strategy.context_of)."""
    tel = f.telemetry
    assert tel is not None and f.spec is not None
    return ScriptContext(
        cores=tel.usable_cores or 1,
        host_busy=tel.run_cpu_busy,
        loader={"num_workers": f.spec.num_workers},
    )


def _knobs(fix_id: str, ctx: ScriptContext) -> dict | None:
    """What a trial of ``fix_id`` injects into a run like ``ctx``."""
    injection = spec_of(fix_id).injection
    assert injection is not None
    return injection.knobs(ctx)


def _json_findings(doc: dict) -> list[dict]:
    """Every finding of ``analyze --json``'s diagnosis, the rules that saw the same time too."""
    out = []
    for g in doc["findings"]:
        out += [g, *g.get("rules", ())]
    return out


@pytest.mark.parametrize(
    ("cores", "run_cores", "count", "words"),
    [
        (2, 1.5, 2, "2 cores"),  # 75% busy: one per core
        (2, 0.6, 4, "trying 4: 2 per core, the loader waited while the 2 cores sat idle"),
        (2, 1.9, 2, "off the training thread"),  # saturated: loading leaves the step's thread
        (16, 12.0, 8, "16 cores"),  # one per core, 8 at most
    ],
)
def test_the_finding_the_snippet_and_the_trial_say_one_number(
    cores: int, run_cores: float, count: int, words: str
) -> None:
    obs = _obs(_tel(cores, run_cores), workers=0)
    f = derive(obs)
    plan = loader_numbers(f)
    assert plan.count == count and words in plan.why
    finding = SingleProcessLoading().check(f)
    assert finding is not None
    assert f"num_workers={count} (" in finding.message and words in finding.message
    assert finding.evidence["suggested_workers"] == count
    assert words in str(finding.evidence["suggested_workers_why"])
    knobs = _knobs("dataloader_workers", _ctx(f))
    assert knobs is not None and knobs["num_workers"] == count
    d = diagnose(obs)
    snippet = d.fix_here("dataloader_workers", FIXES).snippet  # type: ignore[union-attr]
    assert f"num_workers={count}," in snippet and WORKERS_FORMULA in snippet
    assert snippet.count("os.cpu_count()") == 1  # only in the comment
    snippets = [g["fix"]["snippet"] for g in _json_findings(diagnosis_json(d)) if g["fix"]]
    assert any(f"num_workers={count}," in s for s in snippets)
    assert not any("num_workers=min(" in s for s in snippets)


def test_a_run_without_its_cores_keeps_the_portable_formula() -> None:
    obs = observation({"gpu_compute": 0.5, "dataloader": 0.4}, ops=_SINGLE)
    d = diagnose(obs)
    assert d.snippets == {}
    assert d.fix_here("dataloader_workers", FIXES) == FIXES["dataloader_workers"]
    plan = loader_numbers(derive(obs))
    assert with_workers(FIXES["dataloader_workers"], plan) is FIXES["dataloader_workers"]


def test_the_cores_are_the_usable_ones() -> None:
    """Affinity (telemetry's, or the agent's thread record) decides, not the machine's core
    count."""
    pinned = derive(_obs(_tel(16, 1.5, affinity=2), workers=0))
    assert loader_numbers(pinned).cores == 2 and loader_numbers(pinned).count == 2
    agent = derive(
        _obs(_tel(16, 1.5), workers=0, threads=ThreadUse(intra_op=1, cpu_count=16, affinity=4))
    )
    assert loader_numbers(agent).cores == 4


def test_more_workers_than_usable_cores_on_a_saturated_host_is_named_and_not_grown() -> None:
    obs = _obs(_tel(2, 1.95), workers=4)
    f = derive(obs)
    plan = loader_numbers(f)
    words = "the script asks for 4 workers on 2 usable cores"
    assert plan.over_cores == words
    assert plan.count == 2  # fewer, one per core: never more
    finding = LoaderOnSaturatedHost().check(f)
    assert finding is not None and finding.fix_id == "cache_decoded"
    assert finding.evidence["workers_over_cores"] == words and words in finding.message
    starves = LoaderStarvesStep().check(f)
    assert starves is not None and starves.evidence["workers_over_cores"] == words
    assert starves.fix_id != "dataloader_workers"  # workers are on: no "use more"
    for fix_id in ("dataloader_workers", "prefetch_pinned"):
        knobs = _knobs(fix_id, replace(_ctx(f), device="cuda"))
        assert knobs is not None and knobs["num_workers"] <= 2, fix_id


def test_within_the_cores_a_saturated_host_gets_no_more_workers() -> None:
    f = derive(_obs(_tel(4, 3.8), workers=2))
    plan = loader_numbers(f)
    assert plan.count is None and plan.over_cores is None and plan.suggested == 2
    assert next_worker_count(_ctx(f)) is None
    finding = LoaderOnSaturatedHost().check(f)
    assert finding is not None and "workers_over_cores" not in finding.evidence
    assert "usable cores" not in finding.message


def test_the_plan_climbs_from_the_runs_own_workers_when_there_is_room() -> None:
    assert plan_workers(2, 4, 0.5).count == 8  # twice the 4 now, measured
    assert plan_workers(2, 8, 0.5).count is None  # 4 per core already
    assert plan_workers(1, 0, None).count == 2  # at least 2
    assert plan_workers(32, 0, 0.2).count == 16  # idle cores: twice, 16 at most
    assert "1 per core" in plan_workers(16, 0, 0.2).why
    assert plan_workers(None, 0, None).phrase().startswith(f"num_workers={WORKERS_FORMULA}")
