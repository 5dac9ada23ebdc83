"""Smaller micro-batches with gradient accumulation: the same samples per optimizer step, half the activations."""

from __future__ import annotations

from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, Times, const
from advisors.verdict import Bottleneck, Relative

DOCS = "https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation"
#: accumulation changes the loop: only a script's own flag does it (with the batch flag, so a step keeps its samples)
MANUAL = "gradient accumulation changes the loop (several backwards per optimizer step)"
ACCUM_SCRIPT = """import argparse
import torch
from torch.utils.data import DataLoader
parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--grad-accum-steps", type=int, default=1)
args = parser.parse_args()
loader = DataLoader(list(range(64)), batch_size=args.batch_size)
opt = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1)
for i, x in enumerate(loader):
    if (i + 1) % args.grad_accum_steps == 0:
        opt.step()
"""

FIX = FixSpec(
    id="grad_accumulation",
    title="Smaller micro-batches with gradient accumulation",
    bottleneck=Bottleneck.MEMORY,
    applies_to="any",
    explanation="Same samples per optimizer step, half the activations alive at once.",
    snippet="for i, (x, y) in enumerate(loader):            # loader yields B/k samples\n"
    "    loss = loss_fn(model(x), y) / k\n    loss.backward()\n"
    "    if (i + 1) % k == 0:\n        opt.step(); opt.zero_grad()",
    docs=DOCS,
    effort="loop rewrite",
    settings={"grad_accum_steps": Relative(2)},
    alternatives=("grad_accumulation_x4", "activation_checkpointing"),
    own_flag=Injection(const(grad_accum_steps=Times(2)), "grad_accum_steps"),
    manual=MANUAL,
    examples=(
        FixExample(ON_CPU, knobs={"grad_accum_steps": Times(2)}),
        # a step keeps its 32 samples: two micro-batches of 16
        FixExample(
            ON_CPU,
            script=ACCUM_SCRIPT,
            argv=(),
            changed=("--grad-accum-steps", "2", "--batch-size", "16"),
        ),
    ),
)
