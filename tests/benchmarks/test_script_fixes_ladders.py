"""``benchmarks/script_fixes.py`` prints the framework scripts' ladders side by side, each fix with its verdict and
the line it was shown at."""

from __future__ import annotations

from benchmarks.script_fixes import framework_ladders


def _round(
    fix: str,
    speedup: float | None,
    kept: bool,
    where: str,
    added: str,
    not_applied: str | None = None,
) -> dict:
    return {
        "fix": fix,
        "speedup": speedup,
        "interval": [0.9, 1.2] if speedup else None,
        "kept": kept,
        "not_applied": not_applied,
        "where": where,
        "change": {"kind": "diff", "text": f"--- a/x.py\n+++ b/x.py\n-old\n+{added}\n"},
    }


def test_framework_ladders_side_by_side() -> None:
    results = {
        "trainer": {
            "total_speedup": 1.3,
            "rounds": [
                _round("bf16_autocast", 1.3, True, "/u/hf.py:30", "    bf16=True,"),
                _round(
                    "dataloader_workers",
                    0.98,
                    False,
                    "/u/hf.py:30",
                    "    dataloader_num_workers=4,",
                ),
            ],
        },
        "lightning": {
            "total_speedup": 1.0,
            "rounds": [
                _round("bf16_autocast", None, False, "/u/pl.py:50", "", not_applied="no bf16")
            ],
        },
    }
    lines = framework_ladders(results)
    row = next(ln for ln in lines if ln.startswith("bf16_autocast "))
    assert "1.30x [0.90, 1.20] kept" in row and "not applied" in row
    assert "not tried" in next(ln for ln in lines if ln.startswith("dataloader_workers "))
    assert "dataloader_workers in trainer: hf.py:30 -> dataloader_num_workers=4," in lines
