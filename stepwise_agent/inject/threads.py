"""Threads: what the training process computes with, recorded at its first step, and the ``num_threads`` knob.

The record (``injected.json``'s ``threads``): torch's intra-op and inter-op thread counts as the script left them
(read at the first step, after any ``torch.set_num_threads`` of its own), the machine's cores and the process's
CPU affinity, the training processes on this machine (``LOCAL_WORLD_SIZE``), the thread variables of its
environment. The analyst sets the threads against the cores other programs left free
(:mod:`advisors.rules.host.threads`).

``num_threads=n``: ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` for the processes the script starts (its DataLoader
workers, subprocesses; the launcher also sets them for the script itself, so its pool starts at ``n``) and
``torch.set_num_threads(n)`` in this process, whose OpenMP pool torch sized when the agent imported it. Acted when
torch computes with ``n`` threads at the first step; a script that sets its own count after boot is named.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from stepwise_agent.inject.report import InjectionReport

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: recorded too: how waiting OpenMP threads wait (Stepwise's launcher gives PASSIVE unless its caller set one)
RECORDED_VARIABLES = (*THREAD_VARIABLES, "OMP_WAIT_POLICY")


def thread_facts() -> dict[str, Any]:
    """This process's threads and cores, now (stdlib + torch only)."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    try:
        local = int(os.environ.get("LOCAL_WORLD_SIZE") or 1)
    except ValueError:
        local = 1
    return {
        "intra_op": torch.get_num_threads(),
        "inter_op": torch.get_num_interop_threads(),
        "cpu_count": os.cpu_count(),
        "affinity": affinity,
        "local_processes": local,
        "env": {k: os.environ[k] for k in RECORDED_VARIABLES if k in os.environ},
    }


class ThreadsInjection:
    def __init__(self, knobs: dict[str, Any], report: InjectionReport) -> None:
        self.knobs, self.report = knobs, report
        self.facts: dict[str, Any] | None = None  # recorded at the first step
        self.before: int | None = None
        self.env_before: str | None = None

    def install(self) -> None:
        n = self.knobs.get("num_threads")
        if not n:
            return
        self.before = torch.get_num_threads()
        self.env_before = os.environ.get("OMP_NUM_THREADS")  # the launcher's, when it set one
        for name in THREAD_VARIABLES:  # inherited by every process the script starts
            os.environ[name] = str(n)
        torch.set_num_threads(int(n))

    def first_step(self, loader_workers: int | None) -> None:
        """Record the threads the script trains with; judge ``num_threads`` by them."""
        self.facts = {**thread_facts(), "loader_workers": loader_workers}
        n = self.knobs.get("num_threads")
        k = self.report.knob("num_threads")
        if not n or k is None:
            return
        now = self.facts["intra_op"]
        if now == int(n):
            # the launcher's OMP_NUM_THREADS may have sized the pool before the agent ran: say which set it
            started = (
                f"was {self.before} at boot"
                if self.before != now
                else f"OMP_NUM_THREADS={n} from the launcher sized the pool"
                if self.env_before == str(n)
                else f"{now} at boot already"
            )
            k.act(
                f"torch computes with {now} intra-op thread(s) at the first step ({started}); "
                f"OMP_NUM_THREADS={n} for the processes the script starts"
            )
        else:
            k.refuse(
                f"the script set {now} intra-op threads itself after boot (its own torch.set_num_threads): "
                "change it there"
            )
