"""How each catalog fix reaches a user's unmodified script: the knobs the launcher injects at boot, the knob
whose effect proves the fix acted, and the call in the user's code where the change belongs — or why the fix
cannot be injected ("change it yourself").

A fix's knobs can depend on what the last run showed (:class:`ScriptContext`): the DataLoader worker count is
chosen from the run's own numbers — the loader's current workers, the machine's cores and how busy they were.
When the loader waits while cores sit idle (storage latency, not CPU), more workers than cores are tried; when
the cores are saturated, more workers cannot help and caching or fewer workers are tried instead. Each choice
is then measured A/B like any fix; nothing is assumed to help.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from advisors.experiments.script_diff import construction_site, switch_for
from advisors.experiments.script_knobs import KnobChange, Times, knob_change
from advisors.rules.host.threads import threads_for
from advisors.verdict import Fix
from profilers.telemetry.threads import ThreadUse
from profilers.run.script_spec import ScriptSpec

SATURATED_HOST = 0.85  # host cores this busy (share of all cores) leave no room for more workers
IDLE_HOST = 0.6  # below this, the loader is waiting on something other than the CPU
MAX_WORKERS_PER_CORE = 4


@dataclass(frozen=True)
class ScriptContext:
    """What the last run of the script showed: its device, cores, how busy they were, its loader's settings."""

    device: str = "cpu"
    world_size: int = 1
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    host_busy: float | None = None  # share of all host cores busy during steady steps (0..1)
    loader: Mapping[str, Any] = field(default_factory=dict)  # the training DataLoader's effective settings
    sites: Mapping[str, Any] = field(default_factory=dict)  # call sites in the user's code (the first of each)
    all_sites: Mapping[str, Any] = field(default_factory=dict)  # every site of each kind (a GAN's two models)
    config: Mapping[str, Any] = field(default_factory=dict)  # how the script is configured (agent: inject.config)
    threads: ThreadUse | None = None  # torch's threads in the last run (agent: injected.json threads)
    other_cores: float | None = None  # cores other programs used during its steady steps (telemetry)

    @property
    def workers(self) -> int:
        return int(self.loader.get("num_workers") or 0)


def worker_count(ctx: ScriptContext) -> int | None:
    """The next worker count to measure, or ``None`` when more workers cannot help (cores saturated)."""
    busy, cores, now = ctx.host_busy, ctx.cores, ctx.workers
    if busy is not None and busy >= SATURATED_HOST:
        if now == 0:
            return cores  # loading on the main thread competes with the step itself: move it off
        return cores if now > cores else None  # fewer workers than now, or nothing to gain from workers
    if now == 0:
        return cores * 2 if busy is not None and busy < IDLE_HOST else cores
    return min(now * 2, cores * MAX_WORKERS_PER_CORE) if now < cores * MAX_WORKERS_PER_CORE else None


def _workers(ctx: ScriptContext, extra: Mapping[str, Any]) -> dict[str, Any] | None:
    n = worker_count(ctx)
    if n is None or n == ctx.workers:
        return None
    knobs: dict[str, Any] = {"num_workers": n, "persistent_workers": True, "prefetch_factor": 4, **extra}
    if ctx.device == "cuda":
        knobs["pin_memory"] = True
    return knobs


def _threads(ctx: ScriptContext) -> dict[str, Any] | None:
    """Intra-op threads that fit the cores other programs left free (:func:`advisors.rules.host.threads.threads_for`),
    when that is fewer than the last run used."""
    t = ctx.threads
    if t is None:
        return None
    n = threads_for(t.affinity or ctx.cores, ctx.other_cores, t.local_processes)
    return {"num_threads": n} if n < t.intra_op else None


@dataclass(frozen=True)
class Injection:
    """``knobs(ctx)``: what to inject (``None``: nothing left to try here); ``proof``: the knob that must act for
    the fix to count as applied; ``target``: the call site the change belongs at (``None``: no single place)."""

    knobs: Callable[[ScriptContext], dict[str, Any] | None]
    proof: str
    target: str | None


def _const(**knobs: Any) -> Callable[[ScriptContext], dict[str, Any]]:
    return lambda ctx: dict(knobs)


INJECTIONS: dict[str, Injection] = {
    "dataloader_workers": Injection(lambda ctx: _workers(ctx, {}), "num_workers", "dataloader"),
    # pinned memory is this fix's own lever; without CUDA it would repeat dataloader_workers exactly
    "prefetch_pinned": Injection(lambda ctx: _workers(ctx, {"pin_memory": True}) if ctx.device == "cuda" else None,
                                 "num_workers", "dataloader"),
    "cache_decoded": Injection(_const(cache_decoded=True), "cache_decoded", "dataloader"),
    "pin_memory": Injection(_const(pin_memory=True), "pin_memory", "dataloader"),
    "bf16_autocast": Injection(_const(autocast="bf16"), "autocast", "model_call"),
    "fp16_autocast": Injection(_const(autocast="fp16"), "autocast", "model_call"),
    "tf32": Injection(_const(matmul_precision="high"), "matmul_precision", None),
    "torch_compile": Injection(_const(compile=True), "compile", "model_call"),
    # reduce-overhead compile captures CUDA graphs; on a CPU it captures none, so nothing is compiled there and
    # the agent says "CUDA graphs need a GPU" instead of timing an ordinary compile under this fix's name
    "cuda_graphs": Injection(lambda ctx: {"compile": True, "compile_mode": "reduce-overhead"} if ctx.device == "cuda"
                             else {"compile_mode": "reduce-overhead"}, "compile_mode", "model_call"),
    "channels_last": Injection(_const(channels_last=True), "channels_last", "model_call"),
    "fused_optimizer": Injection(_const(optimizer_impl="fused"), "optimizer_impl", "optimizer"),
    "foreach_optimizer": Injection(_const(optimizer_impl="foreach"), "optimizer_impl", "optimizer"),
    "cudnn_benchmark": Injection(_const(cudnn_benchmark=True), "cudnn_benchmark", None),
    "expandable_segments": Injection(_const(alloc_conf="expandable_segments:True"), "alloc_conf", None),
    "set_num_threads": Injection(_threads, "num_threads", None),
    "ddp_bucket_size": Injection(_const(bucket_cap_mb_factor=0.25), "bucket_cap_mb_factor", "ddp"),
    "grad_compression": Injection(_const(grad_compression="bf16"), "grad_compression", "ddp"),
    "ddp_static_graph": Injection(_const(static_graph=True), "static_graph", "ddp"),
}

#: Fixes no injection can make (they change the training loop) that a script's own flag can, by the argparse
#: convention (:mod:`advisors.experiments.script_knobs`): what each asks of the flags, and the knob whose effect the
#: agent checks. Accumulation keeps a step's samples (micro-batches of the step), no_sync accumulation keeps the
#: micro-batch (k of them per step, one all-reduce). A script without such a flag gets the fix as advice.
OWN_FLAGS: dict[str, Injection] = {
    "grad_accumulation": Injection(_const(grad_accum_steps=Times(2)), "grad_accum_steps", None),
    "grad_accumulation_x4": Injection(_const(grad_accum_steps=Times(4)), "grad_accum_steps", None),
    "activation_checkpointing": Injection(_const(activation_checkpointing=True), "activation_checkpointing", None),
    "ddp_no_sync": Injection(_const(ddp_no_sync=True, grad_accum_steps=Times(4), batch_size=Times(4)),
                             "ddp_no_sync", None),
    "larger_batch": Injection(_const(batch_size=Times(2)), "batch_size", None),
    # a script's own CUDA-graphs switch first; without one, torch.compile(mode="reduce-overhead") is injected
    "cuda_graphs": Injection(_const(cuda_graphs=True), "cuda_graphs", None),
}

#: Fixes that need the training loop itself changed: advice, shown as "not injectable: change it yourself" (those
#: of :data:`OWN_FLAGS` are measured through the script's own flag when it has one).
NOT_INJECTABLE: dict[str, str] = {
    "grad_accumulation": "gradient accumulation changes the loop (several backwards per optimizer step)",
    "grad_accumulation_x4": "gradient accumulation changes the loop (several backwards per optimizer step)",
    "activation_checkpointing": "checkpointing wraps blocks inside your model's forward",
    "ddp_no_sync": "no_sync accumulation changes the loop (several backwards per all-reduce)",
    "larger_batch": "a new batch size changes what one step trains on (and the learning rate that fits it)",
    "avoid_syncs": "the .item() calls are in your loop",
    "early_stopping": "stopping early needs your validation loop",
    "all_to_all_overlap": "pipelining the all-to-all changes how your loop drives batches (e.g. TorchRec's pipeline)",
    "fsdp_prefetch": "FSDP prefetching is set where your model is sharded",
}


def not_injectable(fix: Fix) -> str | None:
    """Why ``fix`` cannot be injected into a script, or ``None`` when it can."""
    if fix.id in INJECTIONS:
        return None
    return NOT_INJECTABLE.get(fix.id, f"{fix.title} has no injection: it needs a change in your code")


#: Fixes that act on convolutions only: not worth a trial on a model the launcher saw without any.
CONV_ONLY = ("channels_last", "cudnn_benchmark")


def script_knob(spec: ScriptSpec, fix: Fix, ctx: ScriptContext) -> KnobChange | None:
    """``fix`` as the script's own flag or config line (:mod:`advisors.experiments.script_knobs`), if it has one
    (its own switch for the fix first, then the knobs its injection would set)."""
    for inj in (OWN_FLAGS.get(fix.id), INJECTIONS.get(fix.id)):
        knobs = inj.knobs(ctx) if inj is not None else None
        change = knob_change(knobs, ctx.config, spec.command, spec.cwd, inj.proof) if inj and knobs else None
        if change is not None:
            return change
    return None


def script_patched(spec: ScriptSpec, fix: Fix, ctx: ScriptContext) -> ScriptSpec | None:
    """``spec`` with ``fix`` applied, or ``None`` when the fix has nothing (new) to change here: the user's command
    with the script's own flag or config line changed when it has one for the fix (nothing injected, the effect
    checked), else the fix's knobs injected."""
    if fix.id in CONV_ONLY and (ctx.sites.get("model_call") or {}).get("convolutions") == 0:
        return None
    if fix.id in OWN_FLAGS and fix.id not in INJECTIONS:  # no injection: the script's own flag, or nothing
        own = script_knob(spec, fix, ctx)
        out = spec.patch(command=own.command, observe=own.observe) if own is not None else spec
        return out if out != spec else None
    inj = INJECTIONS.get(fix.id)
    knobs = inj.knobs(ctx) if inj is not None else None
    if not knobs:
        return None
    change = script_knob(spec, fix, ctx)
    out = spec.patch(command=change.command, observe=change.observe) if change else spec.patch(inject=knobs)
    return out if out != spec else None


def where_for(fix: Fix, ctx: ScriptContext, knobs: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Where ``fix``'s change belongs in the user's code: the first site (``file``, ``line``, ``code``) plus
    ``target`` (the kind of call it changes) and ``all`` (every site the knobs act on, for one diff). A script
    driven by a framework whose switch takes every knob of the fix gets that switch
    (``TrainingArguments(...)``, ``L.Trainer(...)``, ``Accelerator(...)``); ``None``: no single place."""
    inj = INJECTIONS.get(fix.id)
    if inj is None:
        return None
    knobs = knobs if knobs is not None else (inj.knobs(ctx) or {})
    switch = switch_for(knobs, ctx.sites) if inj.target in (None, "dataloader", "model_call", "optimizer") else None
    target = switch or inj.target
    if target is None or target not in ctx.sites:
        return None
    first = dict(ctx.sites[target])
    every = [dict(s) for s in (ctx.all_sites.get(target) or [first])]
    if target == "model_call":  # the training calls (grad enabled), not an evaluation under no_grad
        every = [s for s in every if s.get("grad") is not False] or every
        first = every[0]
    if target == "model_call" and inj.proof in ("compile", "compile_mode"):  # compiled once, where it is built
        built = construction_site(first)
        if built is not None:
            return {**built, "target": "model_build", "all": [built]}
    return {**first, "target": target, "all": every}


def why_not_applied(fix: Fix, applied: Mapping[str, Any] | None) -> str | None:
    """From a patched run's ``injected.json``: why the fix did not act (its proof knob's ``why``), else None."""
    inj = INJECTIONS.get(fix.id) or OWN_FLAGS.get(fix.id)
    if inj is None or applied is None:
        return None
    knob = (applied.get("knobs") or {}).get(inj.proof)
    if knob is None:
        return f"the launcher has no record of {inj.proof}"
    return None if knob.get("acted") else str(knob.get("why") or "its effect was not seen")
