"""A plain step clock for :mod:`benchmarks.loops.public_loops`, independent of Stepwise's agent: runs a training script
with ``runpy`` as ``python SCRIPT ARGS`` would, timing each optimizer step with torch's global step hook, and ends
the process after ``PLAIN_STEPS`` steps, writing the step times (ms) to ``PLAIN_OUT`` as JSON.

    PLAIN_STEPS=30 PLAIN_OUT=times.json python benchmarks/loops/step_clock.py SCRIPT ARGS…

Nothing of Stepwise is imported: the numbers are the script's own steps, measured the way a user would with a
stopwatch around ``optimizer.step()``."""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

STEPS = int(os.environ.get("PLAIN_STEPS", "30"))
OUT = os.environ.get("PLAIN_OUT", "plain_times.json")
marks: list[float] = []


RAISE = (
    os.environ.get("PLAIN_EXIT") == "raise"
)  # end by SystemExit, so a launcher's agent sees a clean end
SEEN = (
    "OMP_",
    "MKL_",
    "KMP_",
    "PYTORCH_",
    "PYTHON",
)  # the variables that set the script's threads and runtime


def _after_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    marks.append(time.perf_counter())
    if len(marks) > STEPS:
        walls = [(b - a) * 1000.0 for a, b in zip(marks, marks[1:])]
        with open(OUT, "w") as f:
            json.dump(
                {
                    "walls_ms": walls,
                    "threads": torch.get_num_threads(),
                    "interop": torch.get_num_interop_threads(),
                    "env": {k: v for k, v in os.environ.items() if k.startswith(SEEN)},
                },
                f,
            )
        sys.stdout.flush()
        if RAISE:
            raise SystemExit(0)
        os._exit(0)  # the script's own loop may run on for epochs: the clock has what it needs


def main() -> None:
    script, *args = sys.argv[1:]
    register_optimizer_step_post_hook(_after_step)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
