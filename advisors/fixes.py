"""The fix catalog: every fix a rule can propose, with the code a user writes.

``FIXES[id]`` is a :class:`~advisors.verdict.Fix`. Its ``spec_patch`` says in settings what the fix changes
(``Relative(2)`` doubles the current value, ``WorkerCount()`` is a worker count for the machine); an experiment
applies a fix to a script — a sample workload's too — through the script's own flags or by injection
(:mod:`advisors.experiments.script_fixes`). A fix with an empty ``spec_patch`` changes what no setting holds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from advisors.verdict import Bottleneck, Device, Fix, Relative

MIN_WORKERS, MAX_WORKERS = 2, 8


@dataclass(frozen=True)
class WorkerCount:
    """As many DataLoader workers as this machine has cores (between 2 and 8), never fewer than now."""

    def __str__(self) -> str:
        return "cores"


def _fix(id: str, title: str, bottleneck: Bottleneck, patch: Mapping[str, Any], applies_to: Device,
         explanation: str, snippet: str) -> Fix:
    return Fix(id=id, title=title, bottleneck=bottleneck, spec_patch=patch, snippet=snippet.strip("\n"),
               applies_to=applies_to, explanation=explanation)


D, M, C, X, H = Bottleneck.DATA, Bottleneck.MEMORY, Bottleneck.COMPUTE, Bottleneck.COMMUNICATION, Bottleneck.HOST
_LOADER = "loader = DataLoader(ds, batch_size=B, shuffle=True,\n"
_WORKERS = "num_workers=min(max(os.cpu_count(), 2), 8)"  # what WorkerCount resolves to, never a fixed number
_PIN = "pin_memory=torch.cuda.is_available()"  # pinned pages only where there is a GPU to copy to
_CATALOG = (
    _fix("dataloader_workers", "DataLoader worker processes", D,
         {"num_workers": WorkerCount(), "pin_memory": True, "persistent_workers": True, "prefetch_factor": 4}, "any",
         "Decode and collate in worker processes that prefetch ahead, so loading overlaps the step.",
         _LOADER + f"                    {_WORKERS}, {_PIN},\n"
         "                    persistent_workers=True, prefetch_factor=4)"),
    _fix("prefetch_pinned", "Persistent workers, deeper prefetch, pinned memory", D,
         {"num_workers": WorkerCount(), "persistent_workers": True, "prefetch_factor": 4, "pin_memory": True}, "any",
         "Keep workers alive across epochs and queue more batches ahead; pinned batches copy asynchronously.",
         _LOADER + f"                    {_WORKERS}, persistent_workers=True,\n"
         f"                    prefetch_factor=4, {_PIN})\n"
         "x = x.to(device, non_blocking=True)"),
    _fix("cache_decoded", "Cache decoded samples", D, {"cache_decoded": True}, "any",
         "Decode each sample once and keep the decoded tensor: later epochs skip the decode entirely.",
         "class Cached(Dataset):\n    def __init__(self, ds): self.ds, self.cache = ds, {}\n"
         "    def __len__(self): return len(self.ds)\n"
         "    def __getitem__(self, i):\n        if i not in self.cache: self.cache[i] = self.ds[i]\n"
         "        return self.cache[i]\nloader = DataLoader(Cached(ds), ...)"),
    _fix("pin_memory", "Pinned host memory for batches", D, {"pin_memory": True}, "cuda",
         "Pinned pages copy at full link bandwidth and allow non_blocking copies that overlap compute.",
         "loader = DataLoader(ds, ..., pin_memory=True)\nx = x.to(device, non_blocking=True)"),
    _fix("grad_accumulation", "Smaller micro-batches with gradient accumulation", M,
         {"grad_accum_steps": Relative(2)}, "any",
         "Same samples per optimizer step, half the activations alive at once.",
         "for i, (x, y) in enumerate(loader):            # loader yields B/k samples\n"
         "    loss = loss_fn(model(x), y) / k\n    loss.backward()\n"
         "    if (i + 1) % k == 0:\n        opt.step(); opt.zero_grad()"),
    _fix("grad_accumulation_x4", "Quarter-size micro-batches with gradient accumulation", M,
         {"grad_accum_steps": Relative(4)}, "any",
         "Same samples per optimizer step, a quarter of the activations alive at once (when halving is not enough).",
         "k = 4  # micro-batches per optimizer step; the loader yields B/k samples\n"
         "for i, (x, y) in enumerate(loader):\n    (loss_fn(model(x), y) / k).backward()\n"
         "    if (i + 1) % k == 0:\n        opt.step(); opt.zero_grad()"),
    _fix("activation_checkpointing", "Activation checkpointing", M, {"activation_checkpointing": True}, "any",
         "Keep only block inputs; recompute activations during backward (about one extra forward).",
         "from torch.utils.checkpoint import checkpoint\n"
         "h = checkpoint(block, h, use_reentrant=False)   # for each block in forward"),
    _fix("expandable_segments", "Expandable allocator segments", M, {}, "cuda",
         "Lets the caching allocator grow segments instead of fragmenting and calling cudaMalloc again.",
         "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True   # before starting Python"),
    _fix("bf16_autocast", "bf16 mixed precision", C, {"precision": "bf16"}, "any",
         "Matmuls and convolutions in bf16 (Tensor Cores / AMX); reductions stay in fp32. No loss scaling needed.",
         "with torch.autocast(device_type=device.type, dtype=torch.bfloat16):\n"
         "    loss = loss_fn(model(x), y)\nloss.backward()"),
    _fix("fp16_autocast", "fp16 mixed precision with GradScaler", C, {"precision": "fp16"}, "cuda",
         "fp16 Tensor Core math where bf16 is missing (pre-Ampere); the GradScaler keeps small gradients alive.",
         "scaler = torch.cuda.amp.GradScaler()\nwith torch.autocast('cuda', dtype=torch.float16):\n"
         "    loss = loss_fn(model(x), y)\nscaler.scale(loss).backward(); scaler.step(opt); scaler.update()"),
    _fix("tf32", "TF32 matmuls", C, {"tf32": True}, "cuda",
         "fp32 GEMMs on Tensor Cores with a 10-bit mantissa: no code change beyond one flag.",
         "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True"),
    _fix("torch_compile", "torch.compile", C, {"compile": True}, "any",
         "Fuses chains of pointwise ops into single kernels and picks better ones; pays a one-off compile.",
         "model = torch.compile(model)"),
    _fix("channels_last", "channels_last memory format", C, {"channels_last": True}, "any",
         "NHWC layout: convolutions avoid layout transposes on Tensor Cores and oneDNN.",
         "model = model.to(memory_format=torch.channels_last)\nx = x.to(memory_format=torch.channels_last)"),
    _fix("fused_optimizer", "Fused optimizer", C, {"optimizer_impl": "fused"}, "any",
         "One kernel updates every parameter instead of several per tensor (CUDA, and CPU for Adam, AdamW, SGD "
         "and Adagrad).",
         "opt = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)"),
    _fix("foreach_optimizer", "foreach optimizer", C, {"optimizer_impl": "foreach"}, "any",
         "Multi-tensor updates: fewer, larger kernels (or loops) per step.",
         "opt = torch.optim.SGD(model.parameters(), lr=lr, foreach=True)"),
    _fix("cudnn_benchmark", "cudnn.benchmark", C, {"cudnn_benchmark": True}, "cuda",
         "cuDNN times its convolution algorithms once per input shape and keeps the fastest.",
         "torch.backends.cudnn.benchmark = True"),
    _fix("early_stopping", "Early stopping", C, {}, "any",
         "Stop when the validation metric has not improved for `patience` evaluations.",
         "if val_loss < best - min_delta: best, bad = val_loss, 0\nelse:\n    bad += 1\n"
         "    if bad >= patience: break"),
    _fix("ddp_no_sync", "Accumulate under DDP no_sync", X,
         {"ddp_no_sync": True, "grad_accum_steps": Relative(4), "batch_size": Relative(4)}, "distributed",
         "Same micro-batch, k micro-batches per optimizer step, one all-reduce per step: k× fewer bytes per sample.",
         "for i, (x, y) in enumerate(loader):\n    last = (i + 1) % k == 0\n"
         "    with (contextlib.nullcontext() if last else ddp.no_sync()):\n"
         "        (loss_fn(ddp(x), y) / k).backward()\n    if last:\n        opt.step(); opt.zero_grad()"),
    _fix("ddp_bucket_size", "Smaller DDP buckets", X, {"bucket_cap_mb": Relative(0.25)}, "distributed",
         "The first bucket fills earlier in backward, so all-reduce overlaps more of it.",
         "ddp = DistributedDataParallel(model, bucket_cap_mb=5)"),
    _fix("grad_compression", "bf16 gradient compression hook", X, {"grad_compression": "bf16"}, "distributed",
         "All-reduce gradients in bf16: half the bytes on the wire, decompressed before the optimizer.",
         "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n"
         "ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)"),
    _fix("ddp_static_graph", "DDP static_graph", X, {}, "distributed",
         "Tells DDP the graph is the same every step: it skips searching for unused parameters and can overlap "
         "more of the all-reduce with backward.",
         "ddp = DistributedDataParallel(model, static_graph=True)"),
    _fix("all_to_all_overlap", "Overlap and shrink the all-to-all", X, {}, "distributed",
         "All-to-all and send/recv move embedding rows (recommendation models) or routed tokens (mixture of experts), "
         "not gradients: no_sync accumulation and DDP buckets cannot touch them. Start the next batch's exchange "
         "under this batch's dense compute, and send fewer bytes (reduced-precision embedding comms; for MoE a lower "
         "capacity factor and experts placed within a node).",
         "# TorchRec: pipeline the sparse all-to-all of batch i+1 under the dense compute of batch i\n"
         "from torchrec.distributed.train_pipeline import TrainPipelineSparseDist\n"
         "pipeline = TrainPipelineSparseDist(model, optimizer, device)\n"
         "it = iter(loader)\nfor _ in range(steps):\n    pipeline.progress(it)\n"
         "# fewer bytes: QCommsConfig(forward_precision=CommType.FP16, backward_precision=CommType.BF16)\n"
         "# MoE: capacity_factor=1.0 and expert-parallel groups inside a node"),
    _fix("fsdp_prefetch", "Prefetch FSDP all-gathers", X, {}, "distributed",
         "All-gather and reduce-scatter belong to sharded training (FSDP, ZeRO), not to DDP: no_sync and bucket sizes "
         "do not apply. Issue the next layer's all-gather before it is needed so it runs under compute, and keep "
         "weights gathered from forward to backward where memory allows.",
         "from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel as FSDP\n"
         "model = FSDP(model, forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE,\n"
         "             limit_all_gathers=True)\n"
         "# FSDP2: fully_shard(block, reshard_after_forward=False) keeps gathered weights for backward"),
    _fix("larger_batch", "Larger batch", H, {"batch_size": Relative(2)}, "any",
         "More work per kernel launch: the host's per-op overhead is paid per batch, not per sample.",
         "loader = DataLoader(ds, batch_size=2 * B, ...)   # scale the learning rate with the batch"),
    _fix("cuda_graphs", "CUDA graphs (reduce-overhead compile)", H, {"cuda_graphs": True}, "cuda",
         "Capture the step's kernels once and replay them with one launch instead of one launch per op: the "
         "host's per-op cost leaves the step. Shapes must stay the same from step to step.",
         "model = torch.compile(model, mode=\"reduce-overhead\")   # captures the step in CUDA graphs\n"
         "# a loop that keeps a step's outputs past the next step: torch.compiler.cudagraph_mark_step_begin()"),
    _fix("set_num_threads", "Intra-op threads to the free cores", H, {}, "any",
         "One intra-op thread per free core: more threads than cores other programs left free wait for one another "
         "at every operator's barrier.",
         "torch.set_num_threads(n)   # n = free cores / training processes on this machine, before training\n"
         "# or for the script and the processes it starts:  OMP_NUM_THREADS=n python train.py"),
    _fix("avoid_syncs", "Fewer host-device syncs", H, {}, "cuda",
         "Every .item() drains the GPU queue; keep running sums on the device and read them every N steps.",
         "running = running + loss.detach()        # no .item() in the loop\n"
         "if step % 50 == 0: print(running.item() / 50); running.zero_()"),
)
FIXES: dict[str, Fix] = {f.id: f for f in _CATALOG}

#: What a fix costs its user, cheapest first: one keyword argument, a flag or config line, a code change, or a
#: rewrite of the training loop. Fixes are offered by expected gain for this effort (advisors.ranking).
EFFORT_LEVELS = ("keyword", "config", "code change", "loop rewrite")
EFFORT: dict[str, int] = {
    "dataloader_workers": 0, "prefetch_pinned": 0, "pin_memory": 0, "fused_optimizer": 0, "foreach_optimizer": 0,
    "ddp_bucket_size": 0, "ddp_static_graph": 0,
    "tf32": 1, "cudnn_benchmark": 1, "expandable_segments": 1, "torch_compile": 1, "cuda_graphs": 1,
    "set_num_threads": 1,
    "bf16_autocast": 2, "fp16_autocast": 2, "channels_last": 2, "cache_decoded": 2, "grad_compression": 2,
    "activation_checkpointing": 2, "larger_batch": 2, "early_stopping": 2, "fsdp_prefetch": 2,
    "grad_accumulation": 3, "grad_accumulation_x4": 3, "ddp_no_sync": 3, "avoid_syncs": 3,
    "all_to_all_overlap": 3,
}


def effort(fix_id: str | None) -> int:
    """The effort level of a fix (index into :data:`EFFORT_LEVELS`); unknown or no fix: the highest."""
    return EFFORT.get(fix_id or "", len(EFFORT_LEVELS) - 1)


#: What to try next, in order, when a fix is rejected: the same bottleneck, another lever.
ALTERNATIVES: dict[str, tuple[str, ...]] = {
    "dataloader_workers": ("cache_decoded", "prefetch_pinned"),
    "prefetch_pinned": ("cache_decoded",),
    "cache_decoded": ("dataloader_workers",),
    "grad_accumulation": ("grad_accumulation_x4", "activation_checkpointing"),
    "grad_accumulation_x4": ("activation_checkpointing",),
    "activation_checkpointing": ("grad_accumulation",),
    "bf16_autocast": ("tf32", "torch_compile", "fp16_autocast"),
    "torch_compile": ("bf16_autocast", "channels_last"),
    "ddp_no_sync": ("grad_compression", "ddp_bucket_size"),
    "grad_compression": ("ddp_no_sync", "ddp_bucket_size"),
    "ddp_bucket_size": ("ddp_no_sync", "grad_compression", "ddp_static_graph"),
    "cuda_graphs": ("larger_batch", "torch_compile"),
}


def get_fix(fix_id: str) -> Fix:
    if fix_id not in FIXES:
        raise KeyError(f"no fix {fix_id!r}; known: {', '.join(FIXES)}")
    return FIXES[fix_id]


def worker_count(cores: int | None, current: int = 0) -> int:
    """DataLoader workers for a machine of ``cores`` cores: as many as cores, between 2 and 8, never fewer than
    ``current`` (what :class:`WorkerCount` resolves to on this machine, and what advice quotes for a run's own)."""
    return max(current, min(max(cores or MIN_WORKERS, MIN_WORKERS), MAX_WORKERS))


#: Settings that act on CUDA only: a fix's settings leave them out on a device known not to be CUDA (pinned pages
#: do nothing without a GPU to copy to; torch warns and ignores them).
CUDA_ONLY_SETTINGS = ("pin_memory",)


def settings_for(fix: Fix, device: str | None) -> dict[str, Any]:
    """The settings ``fix`` changes as said for a run on ``device`` (``None``/``auto``: not known): a CUDA-only
    one is left out where the device is known not to be CUDA."""
    cpu = device not in (None, "auto") and not str(device).startswith("cuda")
    return {k: v for k, v in fix.spec_patch.items() if not (cpu and k in CUDA_ONLY_SETTINGS)}


def applies(fix: Fix, device: str, world_size: int) -> str | None:
    """Why ``fix`` cannot act on this device/world size, or ``None`` when it can."""
    if fix.applies_to == "cuda" and device != "cuda":
        return f"{fix.title} acts on CUDA only; this run is on {device}"
    if fix.applies_to == "distributed" and world_size < 2:
        return f"{fix.title} needs more than one rank"
    return None
