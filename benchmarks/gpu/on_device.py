"""Every CUDA path of Stepwise, run for real on a lent GPU in one call, within a deadline.

    python3 benchmarks/gpu/on_device.py --out "$OUT" --deadline 450 [--only NAME,NAME]

Steps run one at a time (timings must not share the GPU), each as the user would type it (``python -m stepwise
…``) with its own timeout; a step that cannot finish before the deadline is skipped and says so. After each step
``summary.json`` in OUT is rewritten, so a call cut short still returns what ran. At the end the run store
(traces included, as long as the archive stays under 15 MiB) is packed as ``runs.tar.gz`` for fixtures.
``benchmarks/gpu/report.py`` turns the summary into ``benchmarks/results/gpu-<date>-<device>.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def sh(
    argv: list[str], timeout: float, env: dict[str, str], log: Path, cwd: Path = ROOT
) -> dict[str, Any]:
    t0 = time.monotonic()
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(argv)}\n")
        f.flush()
        try:
            p = subprocess.run(
                argv, cwd=cwd, env=env, timeout=timeout, stdout=subprocess.PIPE, stderr=f, text=True
            )
            rc: int | str = p.returncode
            out = p.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = (
                "timeout",
                (e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""),
            )
        f.write(out[-4000:] if isinstance(out, str) else "")
    parsed: Any = None
    try:
        parsed = json.loads(out) if out and out.strip().startswith(("{", "[")) else None
    except json.JSONDecodeError:
        parsed = None
    return {
        "rc": rc,
        "wall_s": round(time.monotonic() - t0, 1),
        "json": parsed,
        "stdout_tail": None if parsed is not None else (out or "")[-3000:],
    }


def telemetry_facts(run_dir: Path) -> dict[str, Any]:
    """NVML sampling rate achieved, and GPU utilisation/memory while the steps ran against outside them."""
    tele = run_dir / "telemetry.jsonl"
    steps = run_dir / "steps.jsonl"
    if not tele.exists():
        return {"error": "no telemetry.jsonl"}
    rows = [json.loads(line) for line in tele.read_text().splitlines() if line.strip()]
    gpu = [r for r in rows if r.get("source") == "nvml"]
    out: dict[str, Any] = {
        "rows": len(rows),
        "sources": sorted({str(r.get("source")) for r in rows}),
        "fields": sorted(set().union(*(r.keys() for r in gpu))) if gpu else [],
    }
    if len(gpu) >= 2:
        span_s = (gpu[-1]["t_unix_ns"] - gpu[0]["t_unix_ns"]) / 1e9
        out["nvml_samples"] = len(gpu)
        out["nvml_span_s"] = round(span_s, 3)
        out["nvml_samples_per_s"] = round((len(gpu) - 1) / span_s, 2) if span_s > 0 else None
        gaps = [(b["t_unix_ns"] - a["t_unix_ns"]) / 1e6 for a, b in zip(gpu, gpu[1:])]
        out["nvml_gap_ms_median"] = round(statistics.median(gaps), 1)
        out["nvml_gap_ms_max"] = round(max(gaps), 1)
    if steps.exists() and gpu:
        st = [json.loads(line) for line in steps.read_text().splitlines() if line.strip()]
        if st:
            # a step's row is written at its end: it spans [t - wall_ms, t]
            lo = min(s["t_unix_ns"] - s["wall_ms"] * 1e6 for s in st)
            hi = max(s["t_unix_ns"] for s in st)
            inside = [r for r in gpu if lo <= r["t_unix_ns"] <= hi]
            outside = [r for r in gpu if not lo <= r["t_unix_ns"] <= hi]
            util_key = next(
                (
                    k
                    for k in ("gpu_util_pct", "util_gpu_pct", "gpu_pct", "sm_util_pct")
                    if any(k in r for r in gpu)
                ),
                None,
            )
            mem_key = next(
                (
                    k
                    for k in ("mem_used_mb", "gpu_mem_used_mb", "memory_used_mb")
                    if any(k in r for r in gpu)
                ),
                None,
            )
            out["steps_span_s"] = round((hi - lo) / 1e9, 3)
            out["nvml_samples_during_steps"] = len(inside)
            for name, key in (("util", util_key), ("mem", mem_key)):
                if key:
                    vin = [r[key] for r in inside if r.get(key) is not None]
                    vout = [r[key] for r in outside if r.get(key) is not None]
                    out[f"{name}_key"] = key
                    out[f"{name}_median_during_steps"] = statistics.median(vin) if vin else None
                    out[f"{name}_median_outside_steps"] = statistics.median(vout) if vout else None
                    out[f"{name}_max_during_steps"] = max(vin) if vin else None
    return out


def brief_analysis(a: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(a, dict):
        return None
    keep = (
        "device",
        "device_name",
        "device_arch",
        "step_time_ms",
        "profiled_step_time_ms",
        "gpu_busy_share",
        "bottleneck",
        "confidence",
        "efficiency",
        "kernel_classes",
        "syncs_per_step",
        "memory",
        "warnings",
        "breakdown",
        "not_enough_data",
    )
    out = {k: a.get(k) for k in keep}
    out["findings"] = [
        {k: f.get(k) for k in ("rule_id", "id", "title", "bottleneck", "severity", "confidence")}
        for f in (a.get("findings") or [])
        if isinstance(f, dict)
    ]
    out["top_kernels"] = (a.get("top_kernels") or [])[:8]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--deadline", type=float, default=450.0, help="seconds for everything, packing included"
    )
    ap.add_argument("--only", default="", help="comma-separated step names (default: all)")
    ap.add_argument(
        "--plan",
        choices=("first", "rungs"),
        default="first",
        help="first: workloads, snapshot, ladders; rungs: one run per knob, the Trainer script",
    )
    a = ap.parse_args()
    t_start = time.monotonic()
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    store = Path("/tmp/stepwise-gpu/runs")
    store.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/stepwise-gpu/work")
    work.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    env = dict(
        os.environ,
        STEPWISE_HOME=str(store),
        PYTHONUNBUFFERED="1",
        STEPWISE_CALIBRATION_DIR="/tmp/stepwise-gpu/calibration",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    py = sys.executable
    sw = [py, "-m", "stepwise"]
    summary: dict[str, Any] = {"started_unix": time.time(), "steps": {}}
    only = {s for s in a.only.split(",") if s}

    def save() -> None:
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))

    def left() -> float:
        return a.deadline - 20 - (time.monotonic() - t_start)

    def step(name: str, argv: list[str], timeout: float, **kw: Any) -> dict[str, Any] | None:
        if only and name not in only:
            return None
        if left() < min(timeout, 30):
            summary["steps"][name] = {
                "skipped": f"{left():.0f} s left of the deadline, needs up to {timeout:.0f}"
            }
            save()
            return None
        r = sh(argv, min(timeout, left()), env, log, **kw)
        summary["steps"][name] = r
        save()
        return r

    # 0. the machine
    envinfo = sh(
        [
            py,
            "-c",
            (
                "import json,torch,platform,sys;d={'python':sys.version.split()[0],'torch':torch.__version__,"
                "'cuda':torch.version.cuda,'cudnn':torch.backends.cudnn.version(),'gpu':torch.cuda.get_device_name(0),"
                "'capability':torch.cuda.get_device_capability(0),'sms':torch.cuda.get_device_properties(0).multi_processor_count,"
                "'mem_gib':round(torch.cuda.get_device_properties(0).total_memory/2**30,1)}\n"
                "try:\n import pynvml as n;n.nvmlInit();d['driver']=n.nvmlSystemGetDriverVersion();d['nvml']=n.nvmlSystemGetNVMLVersion()\n"
                "except Exception as e: d['nvml_error']=repr(e)\n"
                "import time\nx=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16);torch.cuda.synchronize()\n"
                "for _ in range(3): x@x\n"
                "torch.cuda.synchronize();t=time.perf_counter()\n"
                "for _ in range(10): x@x\n"
                "torch.cuda.synchronize();d['bf16_matmul_tflops_measured']=round(10*2*8192**3/(time.perf_counter()-t)/1e12,1)\n"
                "print(json.dumps(d))"
            ),
        ],
        60,
        env,
        log,
    )
    summary["machine"] = {
        **(envinfo.get("json") or {"error": envinfo}),
        "host": platform.node(),
        "cpus": os.cpu_count(),
    }
    save()

    def run_and_analyze(
        name: str, workload: str, size: str, extra: list[str], timeout: float
    ) -> None:
        r = step(
            name, [*sw, "run", workload, "--size", size, "--json", "--label", name, *extra], timeout
        )
        if not r or not isinstance(r.get("json"), dict):
            return
        res = r["json"]
        run_dir = Path(res.get("run_dir") or "")
        r["telemetry"] = telemetry_facts(run_dir) if run_dir.is_dir() else None
        an = (
            sh([*sw, "analyze", str(run_dir), "--json"], 120, env, log)
            if run_dir.is_dir()
            else None
        )
        r["analysis"] = brief_analysis(an.get("json")) if an else None
        r["analysis_rc"] = an.get("rc") if an else None
        save()

    if a.plan == "rungs":
        rungs(run_and_analyze, step, sw, py, work)
        finish(summary, save, out, store, work / "snapshot.pickle")
        return
    # 1. sample workloads on CUDA, stored with NVML telemetry
    run_and_analyze("run_compute_gpu", "compute_bound", "gpu", [], 90)
    run_and_analyze("run_data_bench", "data_bound", "bench", [], 90)
    run_and_analyze("run_memory_bench", "memory_bound", "bench", [], 90)
    run_and_analyze("run_resnet_bench", "resnet_small", "bench", [], 90)
    # 3. a real allocator's snapshot, read back; the OOM run at a budget is run_memory_bench above
    snap = work / "snapshot.pickle"
    r = step("snapshot_write", [py, str(HERE / "snapshot_train.py"), str(snap)], 60)
    if r is not None and snap.exists():
        rr = step("snapshot_read", [*sw, "analyze", str(snap), "--json"], 60)
        if rr is not None:
            rr["snapshot_bytes"] = snap.stat().st_size
        save()
    # 2. optimize on CUDA: the ladder, every rung recorded
    step(
        "optimize_compute_gpu",
        [
            *sw,
            "optimize",
            "compute_bound",
            "--size",
            "gpu",
            "--rounds",
            "3",
            "--trials",
            "3",
            "--json",
            "--quiet",
        ],
        240,
    )
    step(
        "optimize_data_bench",
        [
            *sw,
            "optimize",
            "data_bound",
            "--size",
            "bench",
            "--rounds",
            "2",
            "--trials",
            "3",
            "--json",
            "--quiet",
        ],
        150,
    )
    step(
        "optimize_hf_trainer",
        [
            *sw,
            "optimize",
            "--rounds",
            "1",
            "--trials",
            "3",
            "--steps",
            "20",
            "--json",
            "--timeout",
            "120",
            "--",
            *trainer_command(py, work),
        ],
        240,
    )
    step(
        "optimize_resnet_bench",
        [
            *sw,
            "optimize",
            "resnet_small",
            "--size",
            "bench",
            "--rounds",
            "2",
            "--trials",
            "3",
            "--json",
            "--quiet",
        ],
        150,
    )
    finish(summary, save, out, store, snap)


def trainer_command(py: str, work: Path) -> list[str]:
    """The Hugging Face Trainer script as its example scripts are run: TrainingArguments on the command line."""
    return [
        py,
        str(HERE / "hf_gpt2_train.py"),
        "--output_dir",
        str(work / "hf-out"),
        "--per_device_train_batch_size",
        "16",
        "--max_steps",
        "100000",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--logging_steps",
        "100000",
    ]


def rungs(run_and_analyze: Any, step: Any, sw: list[str], py: str, work: Path) -> None:
    """Each knob of the ladder once, against its baseline on the same machine, then a Trainer script's ladder."""
    for name, workload, size, sets in (
        ("rung_compute_fp32", "compute_bound", "gpu", []),
        ("rung_compute_tf32", "compute_bound", "gpu", ["tf32=true"]),
        ("rung_compute_fp16", "compute_bound", "gpu", ["precision=fp16"]),
        ("rung_compute_bf16", "compute_bound", "gpu", ["precision=bf16"]),
        ("rung_compute_bf16_compile", "compute_bound", "gpu", ["precision=bf16", "compile=true"]),
        ("rung_resnet_base", "resnet_small", "bench", []),
        ("rung_resnet_channels_last", "resnet_small", "bench", ["channels_last=true"]),
        ("rung_resnet_cudnn_benchmark", "resnet_small", "bench", ["cudnn_benchmark=true"]),
        ("rung_resnet_bf16", "resnet_small", "bench", ["precision=bf16"]),
        ("rung_resnet_cuda_graphs", "resnet_small", "bench", ["cuda_graphs=true"]),
    ):
        run_and_analyze(name, workload, size, [x for s in sets for x in ("--set", s)], 75)
    step(
        "optimize_hf_trainer",
        [
            *sw,
            "optimize",
            "--rounds",
            "1",
            "--trials",
            "3",
            "--steps",
            "15",
            "--json",
            "--quiet",
            "--timeout",
            "90",
            "--",
            *trainer_command(py, work),
        ],
        200,
    )


def finish(summary: dict[str, Any], save: Any, out: Path, store: Path, snap: Path) -> None:
    summary["finished_unix"] = time.time()
    save()
    # pack the run store for fixtures (traces included while the archive stays small)
    with tarfile.open(out / "runs.tar.gz", "w:gz") as tar:
        for p in sorted(store.rglob("*")):
            if p.is_file() and p.stat().st_size < 6 * 2**20:
                tar.add(p, arcname=str(p.relative_to(store.parent)))
            if (out / "runs.tar.gz").stat().st_size > 12 * 2**20:
                break
        if snap.exists() and snap.stat().st_size < 4 * 2**20:
            tar.add(snap, arcname="snapshot.pickle")
    print(
        json.dumps(
            {k: (v.get("rc") if isinstance(v, dict) else v) for k, v in summary["steps"].items()}
        )
    )


if __name__ == "__main__":
    main()
