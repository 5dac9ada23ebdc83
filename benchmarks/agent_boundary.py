"""What the agent boundary costs at launch, per interpreter: ``python benchmarks/agent_boundary.py [PYTHON…]``.

For each interpreter (default: Stepwise's own and the tests' second environment), side by side, medians of
``--repeats`` fresh processes: ``import torch`` alone, the whole agent imported from the folder the launcher
builds (stdlib + torch only), and the interpreter probe ``launch`` runs once per interpreter (Python and torch
version, CUDA). The agent's own share is the difference of the first two.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profilers.run.agent_path import agent_folder  # noqa: E402
from profilers.run.interpreter import _PROBE  # noqa: E402

AGENT = "import stepwise_agent.boot, stepwise_agent.inject, stepwise_agent.steps, stepwise_agent.capabilities"


def timed(python: str, code: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run([python, "-c", code], check=True, capture_output=True, env=env, timeout=600)
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("pythons", nargs="*")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    pythons = args.pythons or [sys.executable]
    if not args.pythons and os.environ.get("STEPWISE_USER_ENV"):
        pythons.append(str(Path(os.environ["STEPWISE_USER_ENV"]) / "bin" / "python"))
    with tempfile.TemporaryDirectory() as store:
        env = {"PYTHONPATH": str(agent_folder(Path(store))), "PATH": os.defpath}
        print(
            f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; median of {args.repeats}"
        )
        print(
            f"{'interpreter':<48} {'import torch':>13} {'+ agent':>9} {'agent share':>12} {'probe':>8}"
        )
        for python in pythons:
            rows = {
                name: [timed(python, code, env) for _ in range(args.repeats)]
                for name, code in (("torch", "import torch"), ("agent", AGENT), ("probe", _PROBE))
            }
            torch_s, agent_s, probe_s = (
                statistics.median(rows[k]) for k in ("torch", "agent", "probe")
            )
            print(
                f"{python:<48} {torch_s:>12.2f}s {agent_s:>8.2f}s {agent_s - torch_s:>+11.2f}s {probe_s:>7.2f}s"
            )


if __name__ == "__main__":
    main()
