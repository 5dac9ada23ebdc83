"""COMM001 — collectives the step has to wait for."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fixes import first_fitting
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation

SHOW_ORCHESTRATION_FROM = (
    0.01  # mention the host gaps in the message only when they are at least 1% of the step
)


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

    Fix, by what the collectives are (``Facts.comm_kinds``: collective time by family, from the NCCL/RCCL
    kernel names or the gloo/c10d ops):

    - all-reduce (data-parallel gradients): fewer all-reduces per sample (accumulate micro-batches under
      ``no_sync``); once that is on, compress gradients to bf16 on the wire; once both are on, smaller buckets;
    - all-to-all / send-recv (embedding exchange in recommendation models, expert routing in MoE): gradient
      accumulation and buckets cannot touch it — overlap the exchange with compute and send fewer bytes;
    - all-gather / reduce-scatter (sharded training: FSDP, ZeRO): prefetch the next all-gather.
    """

    id, name, bottleneck = "COMM001", "exposed-communication", Bottleneck.COMMUNICATION
    cause = "collectives"
    thresholds = {"min_exposed_share": 0.10, "high_exposed_share": 0.30}
    fix_id = "ddp_no_sync"
    fires = (
        Example(
            "NCCL exposed 38% of the step, GPU otherwise idle",
            lambda: observation(
                {"gpu_compute": 0.07, "communication": 0.38},
                kernels={"communication": 0.40},
                ranks=(0, 1),
            ),
            fix="ddp_no_sync",
            severity=0.8444,
        ),
        Example(
            "gloo all-reduce 80% of a CPU step",
            lambda: observation({"communication": 0.8, "backward": 0.1}, device="cpu"),
            fix="ddp_no_sync",
            severity=0.8,
        ),
        Example(
            "DLRM-like: SendRecv all-to-all 45% of the step, exposed",
            lambda: observation(
                {"gpu_compute": 0.1, "communication": 0.45},
                kernels={"all_to_all": 0.4, "communication": 0.1},
                ranks=(0, 1),
            ),
            fix="all_to_all_overlap",
            severity=0.8182,
        ),
        Example(
            "FSDP: all-gathers exposed 30% of the step",
            lambda: observation(
                {"gpu_compute": 0.5, "communication": 0.3},
                kernels={"all_gather": 0.35},
                ranks=(0, 1),
            ),
            fix="fsdp_prefetch",
            severity=0.375,
        ),
    )
    passes = (
        Example(
            "heavy but overlapped: 40% of step in NCCL, 2% exposed",
            lambda: observation(
                {"gpu_compute": 0.9, "communication": 0.02},
                comm_total=0.4,
                comm_overlapped=0.38,
                ranks=(0, 1),
            ),
        ),
    )

    def check(self, f: Facts) -> Finding | None:
        if f.comm_exposed < self.t["min_exposed_share"]:
            return None
        severity = f.comm_exposed + f.comm_orchestration
        kind = f.comm_kind
        fix = _next_fix(f)
        return self.finding(
            f,
            severity=severity,
            confidence=ramp(
                f.comm_exposed, self.t["min_exposed_share"], self.t["high_exposed_share"]
            ),
            message=f"Collectives exposed for {pct(f.comm_exposed)} of the step"
            + (
                f" (plus {pct(f.comm_orchestration)} of host gaps around them)"
                if f.comm_orchestration >= SHOW_ORCHESTRATION_FROM
                else ""
            )
            + _kind_phrase(f)
            + ": "
            + _ADVICE[fix],
            evidence={
                "exposed_comm_share": f.comm_exposed,
                "comm_total_share": f.comm_total,
                "comm_overlap_fraction": f.comm_overlap_fraction,
                "comm_share_of_device_busy": f.comm_device_fraction if f.device == "gpu" else None,
                "orchestration_share": f.comm_orchestration,
                "ranks": f.n_ranks,
                "collective_kind": kind,
                **{f"{k}_share_of_comm": v for k, v in sorted(f.comm_kinds.items())},
            },
            fix_id=fix,
        )


_ADVICE = {
    "ddp_no_sync": "all-reduce once per several micro-batches with no_sync accumulation.",
    "grad_compression": "no_sync is on already: compress gradients to bf16 on the wire.",
    "ddp_bucket_size": "no_sync and compression are on already: use smaller DDP buckets so all-reduce starts "
    "earlier in backward.",
    "all_to_all_overlap": "no_sync and DDP buckets cannot touch an all-to-all; overlap the exchange with compute "
    "(pipeline the next batch's) and send fewer bytes.",
    "fsdp_prefetch": "these are sharded training's collectives, not DDP's: prefetch the next all-gather so it "
    "runs under compute.",
}
_KIND = {
    "all_to_all": "all-to-all / send-recv (embedding or expert exchange)",
    "sharded": "all-gather / reduce-scatter (sharded training)",
    "all_reduce": "all-reduce",
}


def _kind_phrase(f: Facts) -> str:
    kind = f.comm_kind
    if kind is None:
        return ""
    return f", {pct(f.comm_kinds[kind])} of collective time in {_KIND[kind]}"


def _next_fix(f: Facts) -> str:
    """The lever that fits the collective: all-to-all and sharded collectives have their own; all-reduce goes
    no_sync, then compression, then buckets, skipping what the run does already."""
    if f.comm_kind == "all_to_all":
        return "all_to_all_overlap"
    if f.comm_kind == "sharded":
        return "fsdp_prefetch"
    return first_fitting(f, "ddp_no_sync", "grad_compression") or "ddp_bucket_size"
