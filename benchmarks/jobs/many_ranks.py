"""Many ranks on this machine: wall time and the peak RSS of every process, local engine vs Ray, against N.

For each N (default 8, 64, 256, 1024) a synthetic job (``benchmarks/jobs/many_ranks_gen.py``: a straggler planted at
rank N // 3, all-reduces that wait on it) is analysed as ``stepwise analyze DIR`` does it (map: one summary per
rank; reduce: the job's breakdown and views), with the summary cache off so every rank is parsed. Each (engine,
N) runs in a fresh process, which reports its own peak RSS (the parent, which reduces: its ``VmHWM``, which
starts afresh at ``exec``, unlike ``ru_maxrss``, which Linux carries over from this benchmark's own process), each
map worker's peak RSS (forked processes for local, Ray's worker processes for ray: each task reports its worker's
``ru_maxrss``) and the largest peak of the parse processes a worker forked for a large file, the time to start Ray
(apart), the map+reduce time, and the straggler it named. ``--kernels`` sets the size of a rank's trace (400: 0.8
MB of JSON; 10000: 21 MB; 100000: 208 MB).

    python benchmarks/jobs/many_ranks.py [--ranks 8 64 256 1024] [--kernels 400] [--engines local ray] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {repo!r})
os.environ["STEPWISE_SUMMARY_CACHE"] = "off"
engine, folder = {engine!r}, {folder!r}
t0 = time.perf_counter()
start_s = 0.0
if engine == "ray":
    import ray
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             runtime_env={{"env_vars": {{"PYTHONPATH": {repo!r}, "STEPWISE_SUMMARY_CACHE": "off"}}}})
    start_s = time.perf_counter() - t0
t1 = time.perf_counter()
from profilers.jobs.engines import map_summaries
from profilers.jobs.reduce import reduce_summaries
from profilers.trace.sources import find_trace_files
files = find_trace_files(folder)
summaries = map_summaries(files, engine)
workers = {{}}
parse = 0
for s in summaries:
    w = s.pop("worker")
    workers[w["pid"]] = max(workers.get(w["pid"], 0), w["max_rss_kb"])
    parse = max(parse, w.get("children_max_rss_kb", 0))

def hwm_mb():
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so a child started by a large parent (this
    # benchmark, after generating 4 x 200 MB of traces in process) would report the parent's peak as its own
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
job = reduce_summaries(summaries)
map_reduce_s = time.perf_counter() - t1
st = job.views["straggler"]
print(json.dumps({{"engine": engine, "ranks": len(files), "start_s": start_s, "map_reduce_s": map_reduce_s,
                  "parent_max_rss_mb": hwm_mb(),
                  "worker_max_rss_mb": sorted(v / 1024 for v in workers.values()),
                  "parse_process_max_rss_mb": parse / 1024,
                  "culprit": None if st is None else st["culprit"],
                  "victims": 0 if st is None else len(st["victims"])}}))
if engine == "ray":
    ray.shutdown()
"""


def run_one(engine: str, folder: Path) -> dict:
    code = CHILD.format(repo=str(REPO), engine=engine, folder=str(folder))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=1800
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{engine} on {folder}: {proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall_s"] = wall
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 256, 1024])
    ap.add_argument(
        "--kernels", type=int, default=400, help="compute kernels per step per rank (3 events each)"
    )
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--engines", nargs="+", default=["local", "ray"])
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    from benchmarks.jobs.many_ranks_gen import write_job
    from profilers.jobs.rank_summary import summarise_file, summary_bytes
    from profilers.trace.sources import find_trace_files

    lines = [
        f"# many_ranks: {os.cpu_count()} CPUs, {a.kernels} compute kernels x {a.steps} steps per rank"
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="many_ranks_") as tmp:
        for n in a.ranks:
            folder = Path(tmp) / f"job{n}"
            t0 = time.perf_counter()
            paths = write_job(folder, n, n // 3, a.steps, a.kernels)
            gen_s = time.perf_counter() - t0
            gz = sum(p.stat().st_size for p in paths) / n
            raw = len(__import__("gzip").decompress(paths[0].read_bytes()))
            kb = summary_bytes(summarise_file(find_trace_files(paths[0])[0], 0)) / 1024
            lines.append(
                f"N={n}: {n} files, {raw / 1e6:.2f} MB JSON ({gz / 1e6:.3f} MB gzip) per rank, "
                f"summary {kb:.1f} kB per rank, generated in {gen_s:.1f} s"
            )
            for engine in a.engines:
                r = run_one(engine, folder)
                r.update(n=n, planted=n // 3, rank_mb=raw / 1e6)
                rows.append(r)
                print(json.dumps(r), flush=True)
            for p in paths:
                p.unlink()
    lines.append("")
    lines.append(
        "| engine | ranks | MB per rank | wall s | start s | map+reduce s | s per rank | parent peak RSS MB | "
        "workers | worker peak RSS MB (min-max) | their parse processes' peak MB | straggler planted / found "
        "| victims |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        w = r["worker_max_rss_mb"]
        lines.append(
            f"| {r['engine']} | {r['n']} | {r['rank_mb']:.1f} | {r['wall_s']:.1f} | {r['start_s']:.1f} | "
            f"{r['map_reduce_s']:.1f} | {r['map_reduce_s'] / r['n']:.3f} | {r['parent_max_rss_mb']:.0f} | "
            f"{len(w)} | {min(w):.0f}-{max(w):.0f} | {r['parse_process_max_rss_mb']:.0f} | "
            f"{r['planted']} / {r['culprit']} | {r['victims']} |"
        )
    text = "\n".join(lines)
    print(text)
    if a.out:
        a.out.write_text(text + "\n\n" + "\n".join(json.dumps(r) for r in rows) + "\n")


if __name__ == "__main__":
    main()
