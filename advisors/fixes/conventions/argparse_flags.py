"""A plain ``argparse`` flag, matched by its name *and* by where its value reaches in the script's source
(:func:`advisors.script_reach.reaches`), never by its name alone."""

from __future__ import annotations

from typing import Any, Mapping

from advisors.fixes.base import Times
from advisors.fixes.conventions.editing import SECONDARY, KnobChange, site_of, with_flag
from advisors.script_reach import reach_line, reaches

#: knob -> (flag names a plain argparse script gives it, where its value must reach)
ARGPARSE_NAMES: dict[str, tuple[tuple[str, ...], str]] = {
    "autocast": (
        (
            "amp",
            "bf16",
            "use_amp",
            "autocast",
            "mixed_precision",
            "use_bf16",
            "mixed",
            "precision",
            "amp_dtype",
            "dtype",
        ),
        "autocast",
    ),
    "num_workers": (
        ("workers", "num_workers", "n_workers", "dataloader_workers", "loader_workers", "j"),
        "dataloader",
    ),
    "compile": (("compile", "torch_compile", "use_compile"), "compile"),
    # the loop's own knobs, which no injection can turn (a fix's ``own_flag``: advisors.fixes)
    "grad_accum_steps": (
        (
            "grad_accum_steps",
            "gradient_accumulation_steps",
            "accumulation_steps",
            "accum_steps",
            "grad_accum",
            "accum_iter",
            "accumulate_grad_batches",
        ),
        "accumulate",
    ),
    "activation_checkpointing": (
        (
            "activation_checkpointing",
            "checkpointing",
            "grad_checkpointing",
            "gradient_checkpointing",
            "checkpoint_activations",
        ),
        "checkpoint",
    ),
    "ddp_no_sync": (("ddp_no_sync", "no_sync"), "no_sync"),
    "cuda_graphs": (("cuda_graphs", "cudagraphs", "cuda_graph", "use_cuda_graphs"), "compile"),
    "batch_size": (("batch_size", "batch", "bs", "train_batch_size"), "batch"),
    "compile_mode": (
        ("compile_mode", "torch_compile_mode"),
        "compile",
    ),  # CUDA graphs: mode="reduce-overhead"
}
#: an autocast flag with choices (``--precision {fp32,bf16,fp16}``): the choice that asks for the fix's dtype
PRECISION_WORDS = {
    "bf16": ("bf16", "bfloat16", "bf16-mixed"),
    "fp16": ("fp16", "float16", "half", "16-mixed"),
}
#: knobs that switch a call on or off: a ``store_true`` flag, or an ``int`` one set to 1 (llm.c's ``--compile 1``)
SWITCHES = ("compile", "cuda_graphs", "activation_checkpointing", "ddp_no_sync")


def change(
    knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str, proof: str
) -> KnobChange | None:
    """A flag per knob, named for it and whose value reaches the call that does it (:func:`_named`); a knob
    :class:`Times` the script's own value is resolved against what the flag holds, and a change of the step's shape
    keeps what the fix means by it (:func:`_step_shape`)."""
    main = {k: v for k, v in knobs.items() if k not in SECONDARY or k == proof}
    if proof not in main or any(k not in ARGPARSE_NAMES for k in main):
        return None
    for parser in config.get("parsers") or []:
        file, line = site_of(parser)
        if not file or parser.get("class") == "HfArgumentParser":
            continue
        reach = reaches(file)
        opts = {knob: _named(parser, knob, reach) for knob in main}
        if any(o is None for o in opts.values()):
            continue
        shaped = _step_shape(main, parser, reach)
        if shaped is None:
            continue
        values, observe = shaped
        found = {k: opts.get(k) or _named(parser, k, reach) for k in values}
        chosen = {k: o for k, o in found.items() if o is not None}
        if len(chosen) < len(values) or not all(
            _fits(k, values[k], o, config) for k, o in chosen.items()
        ):
            continue
        new, typed = command, []
        for knob, value in values.items():
            opt = chosen[knob]
            text = _flag_text(knob, value, opt)
            new = with_flag(new, list(opt["flags"]), text)
            typed.append(max(opt["flags"], key=len) + ("" if text is None else f" {text}"))
        return KnobChange(
            new, observe, "argparse", tuple(typed), file, _acts_at(file, line, proof, chosen)
        )
    return None


def _acts_at(
    file: str, parsed: int | None, proof: str, chosen: Mapping[str, Mapping[str, Any]]
) -> int | None:
    """The line the change acts on: where the proof knob's flag reaches its call (llm.c's ``ctx = …
    dtype=ptdtype`` for ``--dtype``), else the parser's ``parse_args`` line."""
    opt = chosen.get(proof)
    where = ARGPARSE_NAMES.get(proof, ((), ""))[1]
    return (reach_line(file, where, str(opt.get("dest"))) if opt and where else None) or parsed


def _step_shape(
    main: Mapping[str, Any], parser: Mapping[str, Any], reach: Mapping[str, set[str]]
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(flag values, what the run must show)`` of ``main``'s knobs, with :class:`Times` values resolved.

    ``grad_accum_steps`` and ``batch_size`` ask for a step's shape: samples per optimizer step × the batch factor,
    in micro-batches × the accumulation factor. A script whose batch flag already counts the whole step (its value
    is divided by the accumulation flag on its way to the ``DataLoader``: ``batch_size=args.batch // args.accum``)
    takes the new step's samples on that flag; one whose batch flag is the micro-batch (accumulation multiplies it,
    as Hugging Face's does) takes the step's samples ÷ the micro-batches. ``None`` when the flags cannot hold it
    (no batch flag to keep the step's samples, a micro-batch that would not be whole)."""
    plain = {k: v for k, v in main.items() if not isinstance(v, Times)}
    fa, fb = main.get("grad_accum_steps"), main.get("batch_size")
    if not isinstance(fa, Times) and not isinstance(fb, Times):
        return plain, dict(plain)
    a_opt, b_opt = _named(parser, "grad_accum_steps", reach), _named(parser, "batch_size", reach)
    accum = _held(a_opt) if a_opt is not None else 1
    batch = _held(b_opt) if b_opt is not None else None
    if accum is None or accum < 1 or batch is None or batch < 1:
        return None
    split = a_opt is not None and a_opt.get("dest") in reach.get("batch", set())
    samples = (batch if split else batch * accum) * (fb.factor if isinstance(fb, Times) else 1)
    accum2 = accum * (fa.factor if isinstance(fa, Times) else 1)
    if samples % accum2:
        return None
    flags = dict(plain)
    if accum2 != accum:
        flags["grad_accum_steps"] = accum2
    batch2 = samples if split else samples // accum2
    if batch2 != batch:
        flags["batch_size"] = batch2
    observe = {
        **plain,
        **({"grad_accum_steps": accum2} if "grad_accum_steps" in main else {}),
        "batch_size": samples // accum2,
    }  # the training loader's batch: one micro-batch
    return flags, observe


def _held(opt: Mapping[str, Any]) -> int | None:
    value = opt.get("value", opt.get("default"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _named(
    parser: Mapping[str, Any], knob: str, reach: Mapping[str, set[str]]
) -> dict[str, Any] | None:
    names, where = ARGPARSE_NAMES[knob]
    for opt in parser.get("options") or []:
        flags = [f.lstrip("-").replace("-", "_") for f in opt.get("flags") or []]
        if opt.get("dest") in reach.get(where, set()) and (
            opt.get("dest") in names or set(flags) & set(names)
        ):
            return opt
    return None


def _precision_choice(value: Any, opt: Mapping[str, Any]) -> str | None:
    """The choice of an autocast option with choices that asks for ``value``'s dtype (``bf16``, ``bfloat16``)."""
    words = PRECISION_WORDS.get(str(value), ())
    return next((str(c) for c in opt.get("choices") or [] if str(c).lower() in words), None)


def _fits(knob: str, value: Any, opt: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    if knob in ("num_workers", "grad_accum_steps", "batch_size"):
        return opt.get("action") == "store" and opt.get("type") == "int"
    if knob == "autocast" and opt.get("action") == "store" and opt.get("choices"):
        # the flag picks the dtype itself — of an autocast the run built (llm.c's is a nullcontext off CUDA: there
        # the flag changes nothing, and the fix is injected instead)
        return _precision_choice(value, opt) is not None and bool(config.get("autocast"))
    if knob == "compile_mode":  # a string option whose value reaches torch.compile (its mode=)
        return opt.get("action") == "store" and opt.get("type") in (None, "str")
    if knob in SWITCHES and opt.get("action") == "store" and opt.get("type") == "int":
        return bool(value)  # --compile 1: its value guards the call
    if opt.get("action") != "store_true":
        return False
    if knob == "autocast":  # the script's own autocast must be of the fix's precision
        want = {"bf16": "bfloat16", "fp16": "float16"}.get(str(value))
        return any(a.get("dtype") == want for a in config.get("autocast") or [])
    return bool(value)


def _flag_text(knob: str, value: Any, opt: Mapping[str, Any]) -> str | None:
    """What follows the flag: nothing for a switch, the choice for a precision, else the value."""
    if opt.get("action") == "store_true":
        return None
    if knob == "autocast":
        return _precision_choice(value, opt)
    if knob in SWITCHES and isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
