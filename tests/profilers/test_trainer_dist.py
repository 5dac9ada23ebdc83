"""Distributed plumbing that needs no second process: the spec comparison that makes every node of a
multi-node run train the same spec.
"""

from __future__ import annotations

from profilers import trainer_dist
from sample_runs import WORKLOADS


def test_a_rank_with_another_spec_is_named_with_the_fields_that_differ() -> None:
    base = WORKLOADS["digits"].spec("tiny")
    same = [base.to_json()] * 3
    assert trainer_dist.spec_mismatch(same) is None
    other = base.patch(steps=7, params={"width": 16}).to_json()
    problem = trainer_dist.spec_mismatch([base.to_json(), base.to_json(), other])
    assert problem is not None and problem.startswith("rank 2 runs another spec than rank 0 (steps=10 vs 7, ")
    assert "params.width=None vs 16" in problem and "same command" in problem
