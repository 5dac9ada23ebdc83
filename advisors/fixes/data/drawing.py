"""The data fixes' bound: the time the run's steady steps spent drawing batches, timed *without* the profiler
(``steps.jsonl``'s ``data_ms``: fetch, decode, collate, the copy to the device) — *if all of it vanished*.

The profiled window's loader share was the bound before, and a cached dataset beat it (14.2x measured against a
bound of 8.9x): under the profiler every operator of the forward and backward pays the profiler's per-event cost
while the decode in Python does not, so the window's share of the loader is smaller than the unprofiled steps'
share. This bound replaces the finding's (``replaces``).
"""

from __future__ import annotations

from advisors.bounds import Reach
from advisors.facts import Facts


def batch_drawing(f: Facts) -> Reach | None:
    """The steady steps' share drawing batches, when the run recorded it."""
    share = f.run.data_wait_share if f.run is not None else None
    if share is None:
        return None
    return Reach(
        share,
        f"the steady steps' time drawing batches ({100 * share:.1f}% of the step without the "
        "profiler: fetch, decode, collate, copy) vanishes",
        replaces=True,
    )


def rest_got_faster(base_rest_ms: float | None, patched_step_ms: float | None) -> str | None:
    """Why a data fix beat the data bound, when the measurement shows it: the patched step is shorter than the
    baseline's step *without* its batch drawing, so the rest of the step got faster too. Measured on the data_bound
    workload: 3.41 ms of forward/backward after each decode against 2.01 ms once batches came from memory (the
    decode leaves cold CPU caches and intra-op threads asleep for the compute after it). No bound read from the
    baseline alone can see that cost, so the bound stays, flagged with this reason."""
    if base_rest_ms is None or patched_step_ms is None or patched_step_ms >= base_rest_ms:
        return None
    return (
        f"the rest of the step got faster too: the patched step ({patched_step_ms:.3g} ms) is shorter than the "
        f"baseline's step without its batch drawing ({base_rest_ms:.3g} ms) — the decode also slowed the compute "
        "after it (cold CPU caches, idle intra-op threads), a cost no bound read from the baseline can time"
    )
