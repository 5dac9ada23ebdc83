"""Short runs averaged: the held-back split is never trained on, members see disjoint subsets, scores average
probabilities."""

from __future__ import annotations

import pytest
import torch

from sample_runs.short_runs import Member, compare, score, split, train_member


def test_held_back_split_is_fixed_and_disjoint_from_training() -> None:
    x, y, xh, yh = split()
    assert len(yh) == 359 and len(y) + len(yh) == 1797
    x2, _, xh2, _ = split()
    assert torch.equal(xh, xh2)
    train_rows = {tuple(r.flatten().tolist()) for r in x}
    assert (
        sum(tuple(r.flatten().tolist()) in train_rows for r in xh) < 5
    )  # digits has a few duplicate images


def test_score_averages_probabilities() -> None:
    y = torch.tensor([0, 1])
    a = Member(torch.tensor([[0.9, 0.1], [0.6, 0.4]]), 10, 1.0)
    b = Member(torch.tensor([[0.7, 0.3], [0.0, 1.0]]), 10, 2.0)
    s = score([a, b], y)
    assert (
        s.accuracy == 1.0 and s.steps == 20 and s.train_s == 2.0
    )  # a alone gets the second one wrong
    assert s.nll == pytest.approx(
        -(torch.log(torch.tensor(0.8)) + torch.log(torch.tensor(0.7))).item() / 2
    )
    assert score([a], y).accuracy == 0.5


def test_a_member_trains_on_its_subset_for_its_steps() -> None:
    m = train_member((0, 1, 4, 5, None))
    assert m.steps == 5 and m.probs.shape == (359, 10)
    assert torch.allclose(m.probs.sum(1), torch.ones(359))


@pytest.mark.slow
def test_compare_runs_members_in_parallel_processes() -> None:
    c = compare(seed=0, steps=40, n=2)
    assert c.equal_compute.steps == 40 and c.long.steps == 40 and c.members == 2
    assert 0.0 <= c.equal_time.accuracy <= 1.0 and c.equal_time.steps > 0
