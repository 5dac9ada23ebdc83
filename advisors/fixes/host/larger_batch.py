"""Larger batch: the host's per-op overhead is paid per batch, not per sample."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, Times, const
from advisors.verdict import Bottleneck, Relative

BATCH_SCRIPT = """import argparse
from torch.utils.data import DataLoader
parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()
loader = DataLoader(list(range(64)), batch_size=args.batch_size)
"""

FIX = FixSpec(
    id="larger_batch",
    title="Larger batch",
    bottleneck=Bottleneck.HOST,
    applies_to="any",
    explanation="More work per kernel launch: the host's per-op overhead is paid per batch, not per sample.",
    snippet="loader = DataLoader(ds, batch_size=2 * B, ...)   # scale the learning rate with the batch",
    docs="https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    effort="code change",
    settings={"batch_size": Relative(2)},
    own_flag=Injection(const(batch_size=Times(2)), "batch_size"),
    manual="a new batch size changes what one step trains on (and the learning rate that fits it)",
    examples=(
        FixExample(ON_CPU, knobs={"batch_size": Times(2)}),
        FixExample(
            ON_CPU, script=BATCH_SCRIPT, argv=("--batch-size", "16"), changed=("--batch-size", "32")
        ),
    ),
)
