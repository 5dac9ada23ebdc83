"""A script's convergence candidates, made concrete from its baseline run's ``injected.json``, and judged — or
reported "not applied" — by the time-to-quality path (recorded curves, fake clock)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cli.optimize_quality as oq
from advisors.experiments.to_quality import QualityRun, to_quality
from advisors.experiments.to_quality_report import quality_json, quality_table
from advisors.quality import script_candidates as sc
from advisors.quality.script_candidates import templates
from advisors.quality.curve import Curve
from advisors.quality.target import Budget
from profilers.run.script_spec import ScriptSpec

TRAIN = "/home/me/train.py"


def injected(
    optimizer: str | None = "SGD",
    lr: float = 0.1,
    batch: int | None = 64,
    fused: bool = False,
    knobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    sites: dict[str, Any] = {}
    if batch is not None:
        sites["dataloader"] = {
            "file": TRAIN,
            "line": 9,
            "code": "loader = DataLoader(data, batch_size=64)",
            "batch_size": batch,
        }
    if optimizer is not None:
        sites["optimizer"] = {
            "file": TRAIN,
            "line": 11,
            "code": f"opt = {optimizer}(...)",
            "type": optimizer,
            "lr": lr,
            "fused": fused,
        }
    return {
        "knobs": knobs or {},
        "sites": sites,
        "all_sites": {},
        "loader": {"batch_size": batch} if batch else {},
        "frameworks": {},
    }


def baseline(tmp_path: Path, **kw: Any) -> sc.Baseline | None:
    run_dir = tmp_path / "base"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "injected.json").write_text(json.dumps(injected(**kw)))
    curve = Curve(
        tuple(float(i) for i in range(400)),
        tuple(1.0 for _ in range(400)),
        tuple(range(400)),
        400.0,
    )
    return sc.read_baseline([QualityRun("ok", curve, str(run_dir))])


def by_kind(base: sc.Baseline | None, k: int = 4) -> dict[str, Any]:
    return {str((c.patch or {}).get("kind")): sc.resolve(c, base) for c in templates(k)}


def test_sgd_gets_the_linear_rule_at_the_users_lines(tmp_path: Path) -> None:
    got = by_kind(baseline(tmp_path))
    batch = got["batch"]
    assert batch.id == "batch_x4_linear_lr" and batch.patch == {"batch_scale": 4, "lr_scale": 4.0}
    assert (
        "batch 64 → 256 at train.py:9" in batch.rule
        and "SGD lr 0.1 → 0.4 at train.py:11" in batch.rule
    )
    assert "linear rule" in batch.rule and "warm-up" not in batch.rule  # 4× is not more than 4×
    accum = got["grad_accum"]
    assert accum.id == "grad_accum_x4_linear_lr" and accum.patch == {
        "grad_accum": 4,
        "lr_scale": 4.0,
    }
    assert "4 micro-batches of 64" in accum.rule
    swap = got["optimizer_swap"]
    assert (
        swap.id == "optimizer_adamw"
        and swap.patch == {"optimizer_swap": "adamw"}
        and "train.py:11" in swap.rule
    )


def test_adamw_gets_the_square_root_rule_and_a_fused_implementation(tmp_path: Path) -> None:
    got = by_kind(baseline(tmp_path, optimizer="AdamW", lr=1e-3))
    assert got["batch"].id == "batch_x4_sqrt_lr" and got["batch"].patch == {
        "batch_scale": 4,
        "lr_scale": 2.0,
    }
    assert "AdamW lr 0.001 → 0.002" in got["batch"].rule and "sqrt rule" in got["batch"].rule
    assert got["optimizer_swap"].id == "optimizer_fused" and got["optimizer_swap"].patch == {
        "optimizer_impl": "fused"
    }
    fused = by_kind(baseline(tmp_path, optimizer="AdamW", lr=1e-3, fused=True))["optimizer_swap"]
    assert fused.patch is None and "already fused" in fused.advice


def test_a_large_rate_warms_up_over_the_baselines_first_samples(tmp_path: Path) -> None:
    batch = by_kind(baseline(tmp_path), k=8)["batch"]
    assert batch.patch == {"batch_scale": 8, "lr_scale": 8.0, "warmup_steps": round(0.05 * 400 / 8)}
    assert "linear warm-up" in batch.rule and "Goyal" in batch.rule


def test_what_cannot_be_injected_is_advice_with_the_reason(tmp_path: Path) -> None:
    none = by_kind(baseline(tmp_path, optimizer=None))
    assert all(
        c.patch is None and "no torch.optim optimizer" in c.advice
        for k, c in none.items()
        if k in ("batch", "grad_accum", "optimizer_swap")
    )
    no_loader = by_kind(baseline(tmp_path, batch=None))
    assert (
        no_loader["batch"].patch is None
        and "no DataLoader(batch_size=…)" in no_loader["batch"].advice
    )
    assert no_loader["grad_accum"].patch is not None  # accumulation needs no DataLoader
    lbfgs = by_kind(baseline(tmp_path, optimizer="LBFGS"))
    assert lbfgs["grad_accum"].patch is None and "closure" in lbfgs["grad_accum"].advice
    assert by_kind(baseline(tmp_path, optimizer="RMSprop"))["optimizer_swap"].patch is None
    assert by_kind(None)["batch"].patch is None


def test_not_applied_reads_every_knob_of_the_candidate() -> None:
    cand = templates()[0]
    concrete = sc.resolve(
        cand,
        sc.Baseline(
            {"type": "SGD", "lr": 0.1, "file": TRAIN, "line": 11},
            {"batch_size": 8, "file": TRAIN, "line": 9},
            None,
            None,
            100,
        ),
    )
    ok = {"batch_scale": {"acted": True}, "lr_scale": {"acted": True}}
    assert sc.why_not_applied(concrete, {"knobs": ok}) is None
    refused = {**ok, "lr_scale": {"acted": False, "why": "no torch.optim optimizer was built"}}
    assert sc.why_not_applied(concrete, {"knobs": refused}) == "no torch.optim optimizer was built"
    assert "no record of batch_scale" in str(
        sc.why_not_applied(concrete, {"knobs": {"lr_scale": {"acted": True}}})
    )
    assert sc.why_not_applied(concrete, None) == "the run left no record of what was injected"
    # while the run goes on: only a refusal stops it, a knob not reached yet does not
    assert (
        sc.refused({"knobs": {"grad_accum": {"acted": False, "refused": False}}}, {"grad_accum": 4})
        is None
    )
    assert (
        sc.refused(
            {
                "knobs": {
                    "grad_accum": {"acted": False, "refused": True, "why": "model.zero_grad()"}
                }
            },
            {"grad_accum": 4},
        )
        == "model.zero_grad()"
    )


ACCUM_REFUSED = "SGD at train.py:11: the script clears its gradients another way than the optimizer's zero_grad()"


def script_runner(tmp_path: Path) -> Any:
    """A CurveRunFn for a script: a batch × 4 run descends twice as fast per second; an accumulation run is
    refused by the agent (the script calls model.zero_grad()). Each run leaves the injected.json the agent would."""
    made: list[ScriptSpec] = []

    def run(spec: Any, stop_at: Any) -> QualityRun:
        assert isinstance(spec, ScriptSpec)
        made.append(spec)
        run_dir = tmp_path / f"run{len(made)}"
        run_dir.mkdir()
        knobs = {}
        for knob, value in spec.inject.items():
            refused = knob == "grad_accum"
            knobs[knob] = {
                "value": value,
                "acted": not refused,
                "refused": refused,
                "evidence": [] if refused else [f"{knob} at train.py:9"],
                "why": ACCUM_REFUSED if refused else None,
            }
        (run_dir / "injected.json").write_text(json.dumps(injected(knobs=knobs)))
        pace = 2.0 if "batch_scale" in spec.inject else 1.0
        seed_jitter = 1 + 0.01 * spec.seed
        t = tuple(i * 0.5 * seed_jitter for i in range(200))
        values = tuple(max(0.05, 2.0 - pace * 0.02 * ti) for ti in t)
        return QualityRun("ok", Curve(t, values, tuple(range(200)), t[-1]), str(run_dir))

    run.made = made  # type: ignore[attr-defined]
    return run


def test_injected_changes_are_judged_and_a_refused_one_is_not_applied(tmp_path: Path) -> None:
    spec = ScriptSpec(command=("python", "train.py"), cwd=str(tmp_path))
    run = script_runner(tmp_path)
    ladder = to_quality(
        spec,
        templates(),
        run,
        Budget(steps=200),
        seeds=3,
        target_value=0.5,
        apply=lambda s, c: s.patch(inject=dict(c.patch)),
        resolve=oq.script_resolve,
        applied=oq.script_applied,
    )
    rounds = {r.candidate.id: r for r in ladder.rounds}
    batch, accum = rounds["batch_x4_linear_lr"], rounds["grad_accum_x4_linear_lr"]
    assert batch.spec is not None and batch.spec.inject == {"batch_scale": 4, "lr_scale": 4.0}
    assert batch.not_applied is None and batch.time_to_target is not None and len(batch.runs) == 3
    assert (
        batch.time_to_target.ratio is not None and batch.time_to_target.ratio > 1.5
    )  # twice the pace, EMA lag
    assert batch.applied is not None and batch.applied["sites"]["dataloader"]["line"] == 9
    assert accum.not_applied == ACCUM_REFUSED and accum.reason == f"not applied: {ACCUM_REFUSED}"
    assert (
        accum.time_to_target is None and not accum.kept and len(accum.runs) == 1
    )  # the other seeds not run
    out = quality_json(ladder)
    by_fix = {r["fix"]: r for r in out["rounds"]}
    assert by_fix["grad_accum_x4_linear_lr"]["time_to_target"] is None
    assert by_fix["grad_accum_x4_linear_lr"]["not_applied"] == ACCUM_REFUSED
    ttt = by_fix["batch_x4_linear_lr"]["time_to_target"]
    assert set(ttt) >= {
        "before_s",
        "after_s",
        "ratio",
        "interval",
        "seeds",
        "reached_before",
        "reached_after",
    }
    assert by_fix["batch_x4_linear_lr"]["applied"]["knobs"]["batch_scale"]["acted"] is True
    table = quality_table(out)
    assert "rule: batch 64 → 256 at train.py:9; SGD lr 0.1 → 0.4 at train.py:11" in table
    assert (
        "injected batch_scale: batch_scale at train.py:9" in table
        and f"not applied: {ACCUM_REFUSED}" in table
    )
