"""The throughput probe under load (issue 43): each batch factor is probed paired with × 1 and its step-time
ratio read within the pair; a pair with one probe beside a busy program is probed again."""

from __future__ import annotations

import pytest

from advisors.experiments.to_quality_goodput import (
    PROBE_STEPS,
    ProbeTime,
    paired_step_times,
    probe_steps,
)
from profilers.run.script_spec import ScriptSpec

SPEC = ScriptSpec(command=("python", "train.py"), cwd="/")


def test_a_burst_during_one_pair_stretches_both_probes_and_leaves_the_ratio() -> None:
    """× 1 costs 10 ms and × k 10·(1 + k/4) ms; a neighbour doubles every step while the × 4 pair runs. Probed one
    after another, × 4 alone was stretched (2× its ratio); within its pair the ratio holds."""
    calls: list[int] = []

    def probe(spec: ScriptSpec, k: int, steps: int) -> ProbeTime:
        calls.append(k)
        busy = 2.0 if len(calls) in (3, 4) else 1.0  # the × 4 pair: the third and fourth probes
        return ProbeTime(10.0 * (1 + (k / 4 if k > 1 else 0)) * busy, 1.0 if busy > 1 else 0.0)

    step_ms, pairs = paired_step_times(SPEC, probe, (2, 4, 8), lambda _: None)
    assert calls == [1, 2, 1, 4, 1, 8]  # both probes of the busy pair were contended: no re-probe
    assert step_ms[1] == pytest.approx(10.0)  # the median of the × 1 probes
    for k in (2, 4, 8):
        assert step_ms[k] == pytest.approx(10.0 * (1 + k / 4))
    assert pairs[4]["others_cores"] == 1.0 and pairs[4]["probed_again"] == 0


def test_a_pair_with_one_contended_probe_is_probed_again() -> None:
    calls: list[int] = []

    def probe(spec: ScriptSpec, k: int, steps: int) -> ProbeTime:
        calls.append(k)
        hog = len(calls) == 2  # the first × 2 probe alone ran beside a busy program
        return ProbeTime(10.0 * k * (3.0 if hog else 1.0), 1.2 if hog else 0.1)

    step_ms, pairs = paired_step_times(SPEC, probe, (2,), lambda _: None)
    assert (
        calls == [1, 2, 1, 2]
        and step_ms[2] == pytest.approx(20.0)
        and pairs[2]["probed_again"] == 1
    )


def test_a_bare_number_is_a_probe_without_a_load_and_none_did_not_run() -> None:
    step_ms, _ = paired_step_times(
        SPEC, lambda s, k, n: None if k == 8 else 5.0 * k, (2, 8), lambda _: None
    )
    assert step_ms == {1: 5.0, 2: 10.0, 8: None}


def test_a_probe_spans_about_two_seconds_of_the_baselines_steps() -> None:
    """Twelve steps of a 0.5 ms script were 6 ms of work: below the telemetry's resolution, inside the noise."""
    asked: list[tuple[int, int]] = []

    def probe(spec: ScriptSpec, k: int, steps: int) -> float:
        asked.append((k, steps))
        return 0.5 * k

    paired_step_times(SPEC, probe, (2, 8), lambda _: None, base_step_ms=0.5)
    assert asked == [(1, 4000), (2, 2000), (1, 4000), (8, 500)]
    assert probe_steps(None, 4) == PROBE_STEPS and probe_steps(1000.0, 1) == PROBE_STEPS
