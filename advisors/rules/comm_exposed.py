"""COMM001 — collectives the step has to wait for."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.model import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation
from profilers.spec import TrainingSpec

SHOW_ORCHESTRATION_FROM = 0.01  # mention the host gaps in the message only when they are at least 1% of the step


class ExposedCommunication(Rule):
    """Exposed communication: collective time (NCCL/RCCL kernels on a GPU, gloo/c10d ops on a CPU) that no
    compute hides. Heavy communication that is overlapped with compute is *not* a bottleneck and does not
    fire this rule.

    On a GPU, the host gaps around exposed collectives count too: in a step whose device timeline is largely
    collectives, the idle time between them is spent preparing and awaiting them (bucketing, split-size
    exchange, waits). That time is apportioned by the exposed-collective share of device busy time
    (``Facts.comm_orchestration``, defined in :mod:`advisors.facts`).

    Severity: exposed share + orchestration share. Thresholds: ``min_exposed_share`` (0.10) of step time;
    ``high_exposed_share`` (0.30).

    Fix: fewer all-reduces per sample (accumulate micro-batches under ``no_sync``); once that is on,
    compress gradients to bf16 on the wire.
    """

    id, name, bottleneck = "COMM001", "exposed-communication", Bottleneck.COMMUNICATION
    thresholds = {"min_exposed_share": 0.10, "high_exposed_share": 0.30}
    fix_id = "ddp_no_sync"
    fires = (
        Example("NCCL exposed 38% of the step, GPU otherwise idle",
                lambda: observation({"gpu_compute": 0.07, "communication": 0.38}, kernels={"communication": 0.40},
                                    ranks=(0, 1)), fix="ddp_no_sync", severity=0.8444),
        Example("gloo all-reduce 80% of a CPU step", lambda: observation({"communication": 0.8, "backward": 0.1},
                                                                        device="cpu"), fix="ddp_no_sync", severity=0.8),
    )
    passes = (Example("heavy but overlapped: 40% of step in NCCL, 2% exposed",
                      lambda: observation({"gpu_compute": 0.9, "communication": 0.02}, comm_total=0.4,
                                          comm_overlapped=0.38, ranks=(0, 1))),)

    def check(self, f: Facts) -> Finding | None:
        if f.comm_exposed < self.t["min_exposed_share"]:
            return None
        severity = f.comm_exposed + f.comm_orchestration
        fix = _next_fix(f.spec)
        return self.finding(
            f, severity=severity,
            confidence=ramp(f.comm_exposed, self.t["min_exposed_share"], self.t["high_exposed_share"]),
            message=f"Collectives exposed for {pct(f.comm_exposed)} of the step"
                    + (f" (plus {pct(f.comm_orchestration)} of host gaps around them)" if f.comm_orchestration >= SHOW_ORCHESTRATION_FROM
                       else "") + ": "
                    + ("all-reduce once per several micro-batches with no_sync accumulation."
                       if fix == "ddp_no_sync" else "compress gradients to bf16 on the wire."),
            evidence={"exposed_comm_share": f.comm_exposed, "comm_total_share": f.comm_total,
                      "comm_overlap_fraction": f.comm_overlap_fraction,
                      "comm_share_of_device_busy": f.comm_device_fraction if f.device == "gpu" else None,
                      "orchestration_share": f.comm_orchestration, "ranks": f.n_ranks},
            fix_id=fix)


def _next_fix(spec: TrainingSpec | None) -> str:
    if spec is not None and spec.ddp_no_sync and spec.grad_compression == "none":
        return "grad_compression"
    return "ddp_no_sync"
