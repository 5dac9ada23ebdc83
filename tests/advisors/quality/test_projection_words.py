"""The projected whole run in words: a run of a fraction of a second is not "0 s"."""

from advisors.quality.projection import _h


def test_short_runs_keep_two_significant_figures() -> None:
    assert _h(0.28 / 3600) == "0.28 s"
    assert _h(4.81 / 3600) == "4.8 s"
    assert _h(50 / 3600) == "50 s"
    assert _h(0.5) == "0.50 hours"
