"""Short runs averaged vs one long run (``sample_runs.short_runs``), on this machine, several seeds.

    .venv/bin/python benchmarks/short_runs.py [--seeds 3] [--steps 600] [--members 4]

Prints held-back accuracy and NLL of one long run, of ``--members`` short runs on disjoint subsets averaged at
equal compute (``steps // members`` each), and at equal wall-clock (each trains as long as the long run did,
all in parallel processes), per seed and as medians.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_runs.short_runs import HELD_BACK, compare  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--members", type=int, default=4)
    a = p.parse_args(argv)
    print(
        f"# short runs averaged vs one long run · {time.strftime('%Y-%m-%d %H:%M')} · "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"digits CNN, SGD lr 0.05 momentum 0.9, batch 32; held-back split {HELD_BACK:.0%} ({int(1797 * HELD_BACK)} "
        "images); "
        f"long run {a.steps} steps; {a.members} short runs on disjoint quarters of the training split\n"
    )
    print(f"{'seed':>4} {'arm':32} {'accuracy':>9} {'NLL':>7} {'train s':>8} {'steps':>6}")
    rows: dict[str, list[tuple[float, float, float]]] = {}
    for seed in range(a.seeds):
        c = compare(seed, a.steps, a.members)
        for name, s in (
            ("one long run", c.long),
            (f"{a.members} short, equal compute", c.equal_compute),
            (f"{a.members} short, equal wall-clock", c.equal_time),
        ):
            print(
                f"{seed:>4} {name:32} {s.accuracy:9.4f} {s.nll:7.4f} {s.train_s:8.2f} {s.steps:6d}",
                flush=True,
            )
            rows.setdefault(name, []).append((s.accuracy, s.nll, s.train_s))
    print("\nmedians over seeds (min–max):")
    for name, vals in rows.items():
        acc, nll, ts = zip(*vals)
        print(
            f"  {name:32} accuracy {statistics.median(acc):.4f} ({min(acc):.4f}–{max(acc):.4f})  NLL "
            f"{statistics.median(nll):.4f} ({min(nll):.4f}–{max(nll):.4f})  train {statistics.median(ts):.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
