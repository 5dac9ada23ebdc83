"""``optimize`` on the four public training loops (issue 42), each checked against an independent plain timing.

    .venv/bin/python benchmarks/loops/public_loops.py [--loops clm,chargpt,fabric,llmc] [--python ENV/bin/python]
                                               [--rounds 2] [--trials 3] [--steps 6] [--warmup 3] [--pairs 3] [--plain-steps 30]
                                               [--out benchmarks/results/public-loops-DATE.md]

The loops are the stand-ins in ``tests/scripts/`` written in each public script's own conventions (Hugging Face's
``run_clm_no_trainer.py``: an accelerate loop; minGPT's ``chargpt.py``: ``--trainer.*`` overrides; a Lightning
Fabric script; llm.c's ``train_gpt2.py``: ``--dtype``/``--compile`` flags, its own token loader). Each is run as a
user runs it: ``python -m advisors optimize --json --fix … -- ENV/bin/python SCRIPT`` in a fresh run store, in
the user's environment (``--python``, default ``$STEPWISE_USER_ENV/bin/python``, which has transformers,
accelerate and lightning: ``scripts/user-env.sh``).

Then every change a round measured is timed again without Stepwise: the script as it is and the script with the
change (its command line, or a copy of its folder with the diff applied) run under
:mod:`benchmarks.loops.step_clock` — torch's own optimizer-step hook and a clock, nothing of Stepwise's agent —
``--pairs`` interleaved pairs of ``--plain-steps`` steps; the plain speed-up is the median of the pairs'
ratios of median steps (after a warm-up of 5 steps). The table: loop, fix, verdict, speed-up [interval], the
plain speed-up (its pairs' range), and where the change landed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "tests" / "scripts"
TIMER = Path(__file__).resolve().parent / "step_clock.py"
WARMUP = 5  # steps the plain clock leaves out first (compile, allocator, first batches)

#: loop → (script, its arguments, the fixes asked for): the public script's own terms, a tiny model
LOOPS: dict[str, tuple[Path, tuple[str, ...], tuple[str, ...]]] = {
    "clm": (SCRIPTS / "clm_no_trainer_train.py", (), ("bf16_autocast", "torch_compile")),
    "chargpt": (SCRIPTS / "chargpt" / "chargpt.py", (), ("bf16_autocast", "torch_compile")),
    "fabric": (SCRIPTS / "fabric_train.py", (), ("bf16_autocast",)),
    "llmc": (SCRIPTS / "gpt2_reference_train.py", (), ("bf16_autocast", "fused_optimizer")),
}


def _optimize(
    python: str,
    script: Path,
    args: tuple[str, ...],
    fixes: tuple[str, ...],
    work: Path,
    opts: argparse.Namespace,
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "advisors",
        "optimize",
        "--json",
        "--store",
        str(work / "runs"),
        "--rounds",
        str(opts.rounds),
        "--trials",
        str(opts.trials),
        "--steps",
        str(opts.steps),
        "--warmup",
        str(opts.warmup),
        *(a for f in fixes for a in ("--fix", f)),
        "--",
        python,
        str(script),
        *args,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRAINER_OUT": str(work / "trainer-out")}
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=3600, env=env)
    if proc.returncode not in (0, 3):
        return {"error": proc.stderr[-2000:], "rounds": []}
    return json.loads(proc.stdout)


def _patched(
    script: Path, args: tuple[str, ...], python: str, change: dict[str, Any], work: Path, tag: str
) -> list[str] | None:
    """The command that runs the script with ``change`` made, as the user would make it; None when it cannot
    be made without Stepwise (a snippet with no single place)."""
    kind = change.get("kind")
    if kind == "command":
        after = next(line[2:] for line in str(change["text"]).splitlines() if line.startswith("+ "))
        argv = shlex.split(after)
        return [python, *argv[1:]] if argv else None
    if kind == "diff":
        # a fresh copy for each change: one copy shared by a loop's changes timed the second change on top of the
        # first (llm.c's fused AdamW with bf16 as well: "0.07×" on a machine where bf16 alone was 0.08×)
        copy = work / f"patched-{script.parent.name}-{tag}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(script.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
        done = subprocess.run(
            ["patch", "-p1", "-d", str(copy), "--forward", "--batch"],
            input=str(change["text"]),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return None
        return [python, str(copy / script.name), *args]
    return None


def _plain(command: list[str], work: Path, steps: int, tag: str) -> float | None:
    """The median step (ms) of one plain run of ``command`` under the step clock."""
    out = work / f"plain-{tag}.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, "PLAIN_STEPS": str(steps), "PLAIN_OUT": str(out), "HF_HUB_OFFLINE": "1"}
    timed = [command[0], str(TIMER), *command[1:]]
    subprocess.run(timed, cwd=work, capture_output=True, text=True, timeout=1800, env=env)
    if not out.exists():
        return None
    walls = json.loads(out.read_text())["walls_ms"][WARMUP:]
    return statistics.median(walls) if walls else None


def _plain_ab(
    before: list[str], after: list[str], work: Path, pairs: int, steps: int
) -> dict[str, Any]:
    ratios, load = [], []
    for i in range(pairs):
        a = _plain(before, work, steps, f"a{i}")
        b = _plain(after, work, steps, f"b{i}")
        load.append(os.getloadavg()[0])
        if a and b:
            ratios.append(a / b)  # after ÷ before throughput: the step times' inverse ratio
    if not ratios:
        return {"speedup": None, "pairs": [], "load": load}
    return {"speedup": statistics.median(ratios), "pairs": ratios, "load": load}


def _row(loop: str, r: dict[str, Any], plain: dict[str, Any] | None) -> str:
    interval = r.get("interval")
    gain = (
        f"{r['speedup']:.2f}× [{interval[0]:.2f}, {interval[1]:.2f}]"
        if r.get("speedup") and interval
        else f"{r['speedup']:.2f}×"
        if r.get("speedup")
        else "—"
    )
    if plain and plain.get("speedup"):
        p = plain["pairs"]
        said = f"{plain['speedup']:.2f}× ({min(p):.2f}–{max(p):.2f}, {len(p)} pairs)"
    else:
        said = "—"
    change = r.get("change") or {}
    where = (r.get("where") or change.get("kind") or "—").replace(str(REPO) + "/", "")
    outcome = str(r.get("outcome_word") or "—")
    return f"| {loop} | {r.get('fix')} | {outcome} | {gain} | {said} | `{where}` ({change.get('kind') or 'none'}) |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loops", default=",".join(LOOPS))
    p.add_argument(
        "--python",
        default=str(Path(os.environ.get("STEPWISE_USER_ENV", REPO / ".venv-user")) / "bin/python"),
    )
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument(
        "--warmup", type=int, default=3, help="optimize's untimed warm-up steps (its default: 3)"
    )
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--plain-steps", type=int, default=30)
    p.add_argument("--out", type=Path, default=None)
    opts = p.parse_args()
    lines = [
        f"# Public training loops, {time.strftime('%Y-%m-%d %H:%M')} UTC ({platform.node()}, "
        f"{os.cpu_count()} cores, load at start {os.getloadavg()[0]:.1f})",
        "",
        "| loop | fix | verdict | speed-up [95% interval] | plain timing, after ÷ before (pairs) | where |",
        "|---|---|---|---|---|---|",
    ]
    said: list[str] = []  # each verdict's why, in full, below the table
    for loop in opts.loops.split(","):
        script, args, fixes = LOOPS[loop]
        work = Path(tempfile.mkdtemp(prefix=f"loop-{loop}-"))
        t0 = time.monotonic()
        out = _optimize(opts.python, script, args, fixes, work, opts)
        print(f"## {loop}: optimize {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        if out.get("error"):
            lines.append(f"| {loop} | — | optimize failed | — | — | {out['error'][-200:]!r} |")
            continue
        before = [opts.python, str(script), *args]
        for r in out.get("rounds", []):
            change = r.get("change")
            after = (
                _patched(script, args, opts.python, change, work, str(r.get("fix")))
                if change
                else None
            )
            plain = _plain_ab(before, after, work, opts.pairs, opts.plain_steps) if after else None
            lines.append(_row(loop, r, plain))
            said.append(f"- {loop} {r.get('fix')}: {r.get('outcome')}")
            print(lines[-1], file=sys.stderr, flush=True)
    lines += [
        "",
        f"optimize: --rounds {opts.rounds} --trials {opts.trials} --steps {opts.steps} --warmup {opts.warmup}; plain: "
        f"{opts.pairs} interleaved pairs of {opts.plain_steps} optimizer steps, the first {WARMUP} left out, "
        f"load at the end {os.getloadavg()[0]:.1f}.",
        "",
        "The verdicts in full:",
        *said,
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if opts.out:
        opts.out.write_text(text)


if __name__ == "__main__":
    main()
