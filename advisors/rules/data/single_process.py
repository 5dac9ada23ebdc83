"""DATA003 — batches are loaded in the training process itself."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fixes import loader_numbers
from advisors.fixes.data.workers import WORKERS_FORMULA
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation

_SINGLE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


class SingleProcessLoading(Rule):
    """Single-process loading (``num_workers=0``) with exposed loader time: decoding and collation run on the
    training thread, serialised with the step, so none of it can overlap.

    Evidence: the ``_SingleProcessDataLoaderIter`` op in the trace, or ``num_workers=0`` in a stored run's spec.

    Thresholds: ``moderate_share`` (0.05) — exposed loader time worth fixing; ``high_share`` (0.20).

    Fix: worker processes with prefetching and pinned memory; the message quotes the run's own usable cores
    (host telemetry) and the one worker count :func:`advisors.fixes.plan_workers` picks for the run, with
    its reason (the count an Apply trial injects and the fix's snippet writes).
    """

    id, name, bottleneck = "DATA003", "single-process-loading", Bottleneck.DATA
    cause = "loader_wait"
    thresholds = {"moderate_share": 0.05, "high_share": 0.20}
    fix_id = "dataloader_workers"
    fires = (
        Example(
            "single-process iterator, 40% exposed",
            lambda: observation({"gpu_compute": 0.5, "dataloader": 0.4}, ops={_SINGLE: 0.4}),
            fix="dataloader_workers",
            severity=0.4,
        ),
    )
    passes = (
        Example(
            "single-process iterator but only 2% exposed",
            lambda: observation({"gpu_compute": 0.9, "dataloader": 0.02}, ops={_SINGLE: 0.02}),
        ),
        Example(
            "multi-process iterator",
            lambda: observation(
                {"gpu_compute": 0.5, "dataloader": 0.4},
                ops={"enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__": 0.4},
            ),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        if f.loader_mode is None and f.loader_exposed > 0:
            return "the trace does not say whether the DataLoader used worker processes"
        return None

    def check(self, f: Facts) -> Finding | None:
        if f.loader_mode != "single_process" or f.loader_exposed < self.t["moderate_share"]:
            return None
        n = loader_numbers(f)
        return self.finding(
            f,
            severity=f.loader_exposed,
            confidence=ramp(f.loader_exposed, self.t["moderate_share"], self.t["high_share"]),
            message=f"Batches are loaded in the training process ({pct(f.loader_exposed)} of the step): "
            f"set {n.phrase()} so loading overlaps the step.",
            evidence={
                "loader_mode": "single_process",
                "dataloader_exposed_share": f.loader_exposed,
                "num_workers": n.current,
                "cpu_count": n.cores,
                # no number without the cores it is for: the formula, to be read on the training machine
                "suggested_workers": n.suggested if n.cores else WORKERS_FORMULA,
                "suggested_workers_why": n.why,
            },
        )
