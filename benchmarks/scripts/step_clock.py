"""Times a training script's optimizer steps, the same way bare and under Stepwise, and ends it after N steps.

``python step_clock.py OUT STEPS SCRIPT [ARGS…]`` runs ``SCRIPT`` as ``__main__`` with a global optimizer-step
hook that stamps ``time.perf_counter()`` after each step; after ``STEPS`` steps it writes the stamps, torch's
thread counts and the script's thread and runtime variables to ``OUT`` (JSON) and ends the script with exit 0.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

out, steps, script, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
stamps: list[float] = []
PREFIXES = ("OMP_", "MKL_", "KMP_", "PYTORCH_", "PYTHON")


def _stamp(optimizer: object, a: object, kw: object) -> None:
    stamps.append(time.perf_counter())
    if len(stamps) >= steps:
        seen = {k: v for k, v in os.environ.items() if k.startswith(PREFIXES)}
        with open(out, "w", encoding="utf-8") as fh:
            json.dump({"stamps": stamps, "threads": torch.get_num_threads(),
                       "interop": torch.get_num_interop_threads(), "env": seen}, fh)
        raise SystemExit(0)


register_optimizer_step_post_hook(_stamp)
sys.argv = [script, *args]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
