"""How a job's bottleneck and its critical path fit together (profilers.jobs.path_fit): issue 41's 2-rank job read
"Bottleneck communication" above a critical path of 50% idle, 50% host operators and 0% communication, with
nothing reconciling the two."""

from __future__ import annotations

from typing import Any

from profilers.jobs.critical_graph import KIND_WORDS, KINDS
from profilers.jobs.path_fit import path_fit


def _job(by_kind: dict[str, float], straggler: int | None = None) -> dict[str, Any]:
    total = sum(by_kind.values())
    return {
        "ranks": [0, 1],
        "step_ms": [[600.0, 620.0], [610.0, 630.0]],
        "exposed_comm_ms": [[170.0, 160.0], [130.0, 165.0]],
        "straggler": None if straggler is None else {"culprit": straggler},
        "critical_path": {
            "rank": 1,
            "available": True,
            "total_ms": total,
            "by_kind": [
                {"kind": k, "ms": v, "share": round(v / total, 4)}
                for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])
            ],
        },
    }


def test_a_communication_bottleneck_over_a_path_of_host_work_and_idle_is_reconciled() -> None:
    job = _job(
        {"idle": 305.0, "cpu_op": 302.6, "sync_wait": 0.3}
    )  # the hta_sampled_128_ranks job's rank 1
    said = path_fit(job, "communication")
    assert said is not None and said.startswith(
        "Communication is the bottleneck because the ranks wait for each "
        "other in their collectives (exposed for 25% of the median rank's"
    )
    assert (
        "rank 1's own critical path" in said and "idle gaps (50%) and host operators (50%)" in said
    )
    assert "0% in collectives" in said and "cpu_op" not in said  # kinds in words, never identifiers
    marked = path_fit(_job({"idle": 305.0, "cpu_op": 302.6}, straggler=1), "communication")
    assert (
        marked is not None and "because the other ranks wait for it in their collectives" in marked
    )


def test_one_story_needs_no_sentence() -> None:
    assert path_fit(_job({"gpu_communication": 400.0, "cpu_op": 200.0}), "communication") is None
    assert path_fit(_job({"idle": 300.0, "cpu_op": 300.0}), "host") is None
    assert (
        path_fit(
            {"ranks": [0, 1], "critical_path": {"rank": 1, "available": False}}, "communication"
        )
        is None
    )


def test_every_kind_has_words() -> None:
    assert set(KIND_WORDS) == set(KINDS) and len(set(KIND_WORDS.values())) == len(KINDS)
