"""A Hydra job: a ``key=value`` override of a key of the composed config whose value reaches the call."""

from __future__ import annotations

from typing import Any, Mapping

from advisors.fixes.conventions.argparse_flags import ARGPARSE_NAMES
from advisors.fixes.conventions.config_text import yaml_line
from advisors.fixes.conventions.editing import SECONDARY, KnobChange, with_override
from advisors.script_reach import reaches
from stepwise_agent.switches import LIGHTNING_PRECISION


def change(
    knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str, proof: str
) -> KnobChange | None:
    """A Hydra job: a ``key=value`` override of a key of its composed config whose name fits the knob and whose
    value reaches the call that does it in the script (``enabled=cfg.amp``, ``num_workers=cfg.data.workers``),
    as for an argparse flag; the ``where`` is that key's line in the primary config file."""
    job = config.get("hydra") or {}
    script = config.get("script")
    main = {k: v for k, v in knobs.items() if k not in SECONDARY or k == proof}
    if not job or not script or proof not in main:
        return None
    reach = reaches(str(script))
    values = job.get("values") or {}
    if (
        set(main) == {"autocast"} and main["autocast"] in LIGHTNING_PRECISION
    ):  # a Lightning Trainer's precision
        key = next((k for k, v in values.items() if _reaches_trainer_precision(k, v, reach)), None)
        if key is not None:
            text = LIGHTNING_PRECISION[main["autocast"]]
            return KnobChange(
                with_override(command, key, text),
                main,
                "hydra",
                (f"{key}={text}",),
                job.get("file") or script,
                yaml_line(job["file"], key) if job.get("file") else None,
            )
    if any(k not in ARGPARSE_NAMES for k in main):
        return None
    new, typed = command, []
    for knob, value in main.items():
        key = next(
            (k for k, v in values.items() if _hydra_fits(knob, value, k, v, reach, config)), None
        )
        if key is None:
            return None
        text = "true" if isinstance(values[key], bool) else str(value)  # a switch: on
        new = with_override(new, key, text)
        typed.append(f"{key}={text}")
    file = job.get("file")
    return KnobChange(
        new,
        {k: main[k] for k in main},
        "hydra",
        tuple(typed),
        file or script,
        yaml_line(file, typed[0].split("=", 1)[0]) if file else (job.get("site") or {}).get("line"),
    )


def _reaches_trainer_precision(key: str, held: Any, reach: Mapping[str, set[str]]) -> bool:
    """``trainer.precision`` reaches ``L.Trainer(precision=cfg.trainer.precision)`` or ``L.Trainer(**cfg.trainer)``."""
    if not key.endswith("precision") or not (held is None or isinstance(held, (str, int))):
        return False
    return key in reach.get("precision", set()) or (
        key.endswith(".precision") and key.rsplit(".", 1)[0] in reach.get("trainer", set())
    )


def _hydra_fits(
    knob: str,
    value: Any,
    key: str,
    held: Any,
    reach: Mapping[str, set[str]],
    config: Mapping[str, Any],
) -> bool:
    names, where = ARGPARSE_NAMES[knob]
    parts = key.split(".")
    if parts[-1] not in names or not set(parts) <= reach.get(where, set()):
        return False
    if knob == "num_workers":
        return isinstance(held, int) and not isinstance(held, bool)
    if knob == "compile_mode":
        return held is None or isinstance(held, str)
    if not isinstance(held, bool):
        return False
    if knob == "autocast":  # the script's own autocast must be of the fix's precision
        want = {"bf16": "bfloat16", "fp16": "float16"}.get(str(value))
        return any(a.get("dtype") == want for a in config.get("autocast") or [])
    return bool(value)
