"""HOST004's fix bound counts only the operator time oversubscription loses (a fair share of the
free cores: ``1 / (1 − w (1 − max(D', F) / D))``), never all operator time vanishing; and
DataLoader workers beyond the usable cores of an oversubscribed machine are named, with how many
fit."""

from __future__ import annotations

import pytest

from advisors.diagnosis import bound_for, diagnose, diagnosis_json
from advisors.facts import derive
from advisors.fit import workers_that_fit
from advisors.fixes import fix_bounds
from advisors.fixes.host.set_num_threads import oversubscribed_time
from advisors.observation import Observation
from advisors.rules import rule_by_id
from advisors.synthetic import observation, run_facts
from profilers.telemetry.summary import TelemetrySummary
from profilers.telemetry.threads import ThreadUse


def _cpu(
    threads: int,
    others: float,
    cores: int,
    processes: int = 1,
    workers: int | None = None,
    work: float = 0.9355,
) -> Observation:
    """A CPU step ``work`` in operators; ``others`` cores taken by other programs."""
    ours = min(threads * processes, cores - others)
    tel = TelemetrySummary(
        source="host",
        samples=40,
        rate_hz=10.0,
        cpu_count=cores,
        process_cpu_pct=100 * ours,
        system_cpu_pct=100 * (ours + others) / cores,
    )
    use = ThreadUse(
        intra_op=threads,
        local_processes=processes,
        cpu_count=cores,
        affinity=cores,
        loader_workers=workers,
    )
    shares = {"forward": work * 0.4, "backward": work * 0.55, "optimizer": work * 0.05}
    return observation(shares, device="cpu", run=run_facts(telemetry=tel, threads=use))


@pytest.mark.parametrize(
    ("threads", "others", "cores", "procs", "kept"),
    [
        (2, 1.0, 2, 1, 1 / 2),  # minGPT: 2 threads on the 1 core a hog left
        (8, 4.0, 8, 1, 4 / 8),  # 8 threads, 4 of 8 cores taken
        (2, 0.0, 2, 2, 2 / 4),  # two ranks × 2 threads on a quiet 2-core machine
        (4, 1.6, 2, 1, 1 / 4),  # 0.4 of a core free: the one thread left is still slowed
    ],
)
def test_bound_is_the_fair_share_loss_not_all_operator_time(
    threads: int, others: float, cores: int, procs: int, kept: float
) -> None:
    obs = _cpu(threads, others, cores, procs)
    f = derive(obs)
    w = f.device_work
    b = fix_bounds(f)["set_num_threads"]
    assert b.share == pytest.approx(w * (1 - kept), abs=1e-4)
    assert b.speedup == pytest.approx(1 / (1 - w * (1 - kept)), abs=1e-3)
    assert "fair share" in b.assumption and "spinning" in b.assumption
    d = diagnose(obs)
    assert d.binding is not None and d.binding.rule == "HOST004"
    all_gone = 1 / (1 - d.binding.severity)  # all operator time vanishing: 15.5x at w = 0.9355
    assert bound_for(d, "set_num_threads") == b
    assert b.speedup is not None and b.speedup < all_gone
    lead = diagnosis_json(d)["findings"][0]
    assert lead["fix_bound"] == b.to_json() and lead["upper_bound_speedup"] == b.speedup


def test_mingpt_shaped_run_is_bounded_near_two_not_fifteen() -> None:
    bound = bound_for(diagnose(_cpu(2, 1.0, 2)), "set_num_threads")
    assert bound is not None and bound.speedup == pytest.approx(1.88, abs=0.01)


def test_no_bound_without_oversubscription_or_telemetry() -> None:
    assert oversubscribed_time(derive(_cpu(1, 1.0, 2))) is None  # 1 thread on the 1 free core
    use = ThreadUse(intra_op=4, cpu_count=2)
    quiet = observation({"forward": 0.5}, device="cpu", run=run_facts(threads=use))
    assert oversubscribed_time(derive(quiet)) is None  # no telemetry: the free cores unknown


def test_loader_workers_beyond_the_usable_cores_are_named_with_how_many_fit() -> None:
    rule = rule_by_id("HOST004")()
    f = rule.evaluate(derive(_cpu(2, 1.0, 2, workers=4)))
    assert f is not None and f.evidence["loader_workers"] == 4
    assert f.evidence["loader_workers_over_cores"] is True
    assert f.evidence["loader_workers_that_fit"] == 1
    assert "4 worker processes, more than the 2 usable cores" in f.message
    assert "num_workers=1" in f.message
    within = rule.evaluate(derive(_cpu(2, 1.0, 2, workers=2)))  # as many workers as cores
    assert within is not None and within.evidence["loader_workers_over_cores"] is False
    assert "worker processes" not in within.message


def test_workers_that_fit_leave_the_training_threads_their_cores() -> None:
    assert workers_that_fit(2, 1.0, 1) == 1  # 1 free core, the one thread's: still one worker
    assert workers_that_fit(8, 2.0, 1) == 1  # 6 free cores, 6 threads: one worker
    assert workers_that_fit(8, 2.0, 2) == 1  # 2 processes × 3 threads
    assert workers_that_fit(8, 2.5, 1) == 1  # 5.5 free: 5 threads, half a core left: one
    assert workers_that_fit(16, 0.0, 3) == 1  # 3 × 5 threads on 16 cores: one left
    assert workers_that_fit(17, 0.0, 3) == 2  # 3 × 5 threads on 17 cores: two left
