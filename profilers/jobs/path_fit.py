"""How a job's bottleneck and its slowest rank's critical path fit together, in one sentence.

The two answer different questions and can seem to disagree. The bottleneck is judged over every rank's steps: on
a job whose ranks wait for each other, that waiting is exposed communication, so the job reads "communication".
The critical path (``job.critical_path``) is the chain of dependent work of *one* rank's median step, the rank of
most work: the rank the others wait for hardly waits itself, so its path is mostly its own work, host operators,
kernels or idle gaps, with little or no communication on it. Both are right: the others' communication is the
time they spend waiting for that rank's path. :func:`path_fit` says so where it matters (a communication
bottleneck over a path that is mostly something else); the Job page, the Analysis page's Ranks tab and a
report's Ranks section show its sentence.
"""

from __future__ import annotations

import statistics
from typing import Any

from profilers.jobs.critical_graph import KIND_WORDS

COMMUNICATION = (
    "communication"  # the advisor's bottleneck value (advisors.verdict.Bottleneck.COMMUNICATION)
)
SHOWN_SHARE = 0.1  # kinds under a tenth of the path are left out of the sentence


def path_fit(job: dict[str, Any], bottleneck: str | None) -> str | None:
    """The sentence for a job (``analyze``'s ``job``) whose bottleneck is communication while its critical path is
    mostly something else; ``None`` where they tell one story (or there is no path)."""
    cp = job.get("critical_path")
    if bottleneck != COMMUNICATION or not cp or not cp.get("available") or not cp.get("by_kind"):
        return None
    kinds = sorted(cp["by_kind"], key=lambda k: -float(k["share"]))
    if kinds[0]["kind"] == "gpu_communication":
        return None  # the path itself is mostly collectives: one story
    rank = cp["rank"]
    comm = next((float(k["share"]) for k in kinds if k["kind"] == "gpu_communication"), 0.0)
    parts = [
        f"{KIND_WORDS.get(k['kind'], k['kind'])} ({float(k['share']):.0%})"
        for k in kinds
        if k["kind"] != "gpu_communication" and float(k["share"]) >= SHOWN_SHARE
    ][:2]
    straggler = job.get("straggler")
    who = (
        "the other ranks wait for it"
        if straggler and straggler.get("culprit") == rank
        else "the ranks wait for each other"
    )
    exposed = _exposed_share(job)
    waiting = (
        f" (exposed for {exposed:.0%} of the median rank's step)" if exposed is not None else ""
    )
    return (
        f"Communication is the bottleneck because {who} in their collectives{waiting}, while rank {rank}'s own "
        f"critical path, the chain of work that sets its step, is {' and '.join(parts) or 'its own work'} with "
        f"{comm:.0%} in collectives: that work is what the waiting ranks wait for, so shortening it (or "
        "balancing it across the ranks) is what shrinks the communication."
    )


def _exposed_share(job: dict[str, Any]) -> float | None:
    """The median over ranks of a rank's median communication (exposed, or its collectives' time in agent
    summaries) as a share of its median step."""
    comm = job.get("exposed_comm_ms") or job.get("comm_ms")
    steps = job.get("step_ms")
    if not comm or not steps:
        return None
    shares = []
    for c_row, s_row in zip(comm, steps):
        pairs = [(c, s) for c, s in zip(c_row, s_row) if c is not None and s]
        if pairs:
            shares.append(
                statistics.median(c for c, _ in pairs) / statistics.median(s for _, s in pairs)
            )
    return statistics.median(shares) if shares else None
