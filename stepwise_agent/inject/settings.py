"""How the run was configured, as its objects showed it — for any script, a user's or a sample workload's:
``injected.json``'s ``settings``, which the analysis reads as the run's configuration (the judgement of a run never
depends on who wrote its loop).

Every value is what was seen, not what was asked: the training DataLoader's effective keywords and its dataset's
type; the autocast contexts the script's code entered (and a fix's injected one); ``torch.compile`` calls and their
mode; 4-D weights in channels_last; the optimizer's implementation; backward passes per optimizer step;
checkpointing calls, ``no_sync()`` contexts and DDP comm hooks; torch's TF32 and cuDNN flags at the first step;
hand-written attention the agent replaced with ``scaled_dot_product_attention``.
A value nothing showed is ``None`` (no DataLoader: no worker count).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from stepwise_agent.inject.loop import GRAPH_MODES

_CACHE = re.compile(r"cach", re.IGNORECASE)  # a dataset type named for a cache of decoded samples


def _acted(report: Mapping[str, Any], knob: str) -> Any:
    """The value of a knob injected (or set by the script's own flag) that acted, else None."""
    k = (report.get("knobs") or {}).get(knob) or {}
    return k.get("value") if k.get("acted") else None


def run_settings(
    report: Mapping[str, Any], config: Mapping[str, Any], loop: Any, models: list[Any]
) -> dict[str, Any]:
    """The settings of the run (see the module docs) from the injection ``report`` (knobs, sites, loader), the
    script's recorded ``config`` (autocast contexts, compile calls), the loop's counts and the models seen."""
    loader = report.get("loader") or {}
    sites = report.get("sites") or {}
    opt = sites.get("optimizer") or {}
    entered = [a for a in config.get("autocast") or [] if a.get("enabled")]
    dtypes = {a.get("dtype") for a in entered}
    precision = _acted(report, "autocast") or (
        "bf16" if "bfloat16" in dtypes else "fp16" if "float16" in dtypes else "fp32"
    )
    calls = config.get("compile_calls") or []
    modes = [str((c.get("kwargs") or {}).get("mode")) for c in calls]
    hooks = " ".join(loop.comm_hooks).lower()
    import torch

    four_d = [
        p
        for m in models
        for p in m.parameters()
        if not isinstance(p, torch.nn.parameter.UninitializedParameter) and p.dim() == 4
    ]

    return {
        "num_workers": loader.get("num_workers"),
        "pin_memory": bool(loader.get("pin_memory")),
        "persistent_workers": bool(loader.get("persistent_workers")),
        "prefetch_factor": loader.get("prefetch_factor"),
        "batch_size": loader.get("batch_size"),
        "cache_decoded": bool(
            _acted(report, "cache_decoded") or _CACHE.search(str(loader.get("dataset") or ""))
        ),
        "precision": precision,
        "compile": bool(calls or _acted(report, "compile")),
        "cuda_graphs": bool(loop.graph_captures or any(m in GRAPH_MODES for m in modes)),
        "channels_last": bool(four_d)
        and all(p.is_contiguous(memory_format=torch.channels_last) for p in four_d),
        "optimizer_impl": "fused"
        if opt.get("fused")
        else "foreach"
        if opt.get("foreach")
        else (_acted(report, "optimizer_impl") or ("default" if opt else None)),
        "grad_accum_steps": loop.backwards_per_step,
        "activation_checkpointing": loop.checkpoints > 0,
        "ddp_no_sync": loop.no_syncs > 0,
        "grad_compression": "bf16" if "bf16" in hooks else "fp16" if "fp16" in hooks else "none",
        "tf32": loop.flags.get("tf32"),
        "cudnn_benchmark": loop.flags.get("cudnn_benchmark"),
        "sdpa_attention": bool(_acted(report, "sdpa_attention")),
    }
