"""How big should a piece of a large trace be? Reading time against ``CHUNK_BYTES``, every contender in a fresh
process, interleaved round by round, on the 216k-event shared trace (51 MiB gzip) and on a synthetic
uncompressed trace (the parallel reader's byte-range path, many pieces through the pool).

    python benchmarks/reading/piece_size.py [--sizes-kib 8192,1024,512,256] [--repeats 5] [--synthetic-mb 400]
        [--out FILE]

Per size and input: one worker's whole read of the gzip (``parse_worker.share``, what the head start's worker
does), the sequential reader (``read_sequential``, the dashboard's and one-core path), and ``load_trace`` on two
workers (``STEPWISE_PARSE_WORKERS=2``) of the synthetic file. Wall times of the work inside each process
(imports excluded); medians with min and max.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO.parent / "shared" / "traces" / "communication" / "hta_v100_2rank_216k_events.json.gz"

CHILD = """
import sys, time
sys.path.insert(0, {repo!r})
from profilers.trace import json_events
json_events.CHUNK_BYTES = {chunk}
what, path = {what!r}, {path!r}
if what == "share":
    from profilers.trace import parse_worker
    t = time.perf_counter(); parse_worker.share(path, "t", 0, 1)
elif what == "sequential":
    from profilers.trace.parallel import read_sequential
    from profilers.trace.sources import find_trace_files
    f = find_trace_files(path)[0]
    t = time.perf_counter(); read_sequential(f)
else:
    from profilers.trace.load import load_trace
    t = time.perf_counter(); load_trace(path)
print(time.perf_counter() - t)
"""


def once(what: str, path: Path, chunk: int) -> float:
    env = {**os.environ, "STEPWISE_PARSE_WORKERS": "2"}
    code = CHILD.format(repo=str(REPO), chunk=chunk, what=what, path=str(path))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-kib", default="8192,1024,512,256")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--synthetic-mb", type=int, default=400, help="uncompressed synthetic trace, MB (0: none)"
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    sizes = [int(s) * 1024 for s in args.sizes_kib.split(",")]
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    work = Path(tempfile.mkdtemp(prefix="stepwise-pieces-"))
    cases = [("share", TRACE), ("sequential", TRACE)]
    if args.synthetic_mb:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from trace_parse_kineto import generate_kineto_trace

        synthetic = work / "synthetic.json"
        generate_kineto_trace(synthetic, args.synthetic_mb * 10**6)
        cases.append(("load on 2 workers", synthetic))
    say(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at start")
    times: dict[tuple[str, int], list[float]] = {}
    for r in range(args.repeats):
        order = sizes if r % 2 == 0 else sizes[::-1]
        for what, path in cases:
            for chunk in order:
                times.setdefault((what, chunk), []).append(once(what, path, chunk))
        say(f"round {r + 1}/{args.repeats} done (load {os.getloadavg()[0]:.2f})")
    for what, path in cases:
        say(f"{what}: {path.name} ({path.stat().st_size / 2**20:.0f} MiB on disk)")
        for chunk in sizes:
            xs = times[(what, chunk)]
            say(
                f"  pieces of {chunk // 1024:>5} KiB: median {statistics.median(xs):.3f} s "
                f"[min {min(xs):.3f}, max {max(xs):.3f}] n={len(xs)}"
            )
    say(f"load at end {os.getloadavg()[0]:.2f}")
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
