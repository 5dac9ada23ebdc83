"""``accelerate launch``: ``--mixed_precision bf16`` / ``--dynamo_backend inductor`` among the launcher's options,
when the script's own ``Accelerator(...)`` takes no such argument."""

from __future__ import annotations

import os
from typing import Any, Mapping

from advisors.fixes.conventions.editing import KnobChange, site_of, with_flag
from stepwise_agent.switches import ACCELERATE_PRECISION


def change(
    knobs: dict[str, Any], config: Mapping[str, Any], command: tuple[str, ...], cwd: str, proof: str
) -> KnobChange | None:
    """``accelerate launch``'s own options (before the script), which it passes to the script's ``Accelerator()``
    (``ACCELERATE_MIXED_PRECISION``, ``ACCELERATE_DYNAMO_BACKEND`` in its environment): ``--mixed_precision bf16``,
    when that ``Accelerator(...)`` takes no precision of its own; ``--dynamo_backend inductor`` for compile, when it
    takes no ``dynamo_backend``/``dynamo_plugin`` of its own (``prepare()`` then ``torch.compile``s the model).
    Workers have no launcher option (the DataLoader is the script's own): they map to the script's flag if it has
    one (:func:`advisors.fixes.conventions.argparse_flags.change`), else stay injected."""
    if len(command) < 3 or os.path.basename(command[0]) != "accelerate" or command[1] != "launch":
        return None
    acc = (config.get("frameworks") or {}).get("accelerate") or {}
    asked = acc.get("asked") or {}
    if set(knobs) == {"autocast"} and knobs["autocast"] in ACCELERATE_PRECISION:
        if not acc or asked.get("mixed_precision") is not None:
            return None  # no Accelerator of the user's, or one whose own argument decides
        option, value = "--mixed_precision", ACCELERATE_PRECISION[knobs["autocast"]]
    elif set(knobs) == {"compile"} and knobs["compile"]:
        if (
            "dynamo_backend" not in asked
            or asked["dynamo_backend"] is not None
            or asked.get("dynamo_plugin")
        ):
            return None  # not recorded, or the script's own Accelerator(dynamo_...) decides
        option, value = "--dynamo_backend", "inductor"
    else:
        return None
    at = next(
        (i for i, a in enumerate(command) if i > 1 and a.endswith(".py") and not a.startswith("-")),
        None,
    )
    if at is None:
        return None
    head = with_flag(command[:at], [option], value)
    if head[-2:] == (option, value) and len(head) > at:  # new: typed first, as the docs write it
        head = (*command[:2], option, value, *command[2:at])
    file, line = site_of({"site": acc.get("at")})  # the user's Accelerator(...) call
    return KnobChange(
        (*head, *command[at:]), knobs, "accelerate", (f"{option} {value}",), file, line
    )
