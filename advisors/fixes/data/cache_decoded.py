"""Cache decoded samples: decode each sample once; later epochs read the decoded tensor."""

from __future__ import annotations

from advisors.fit import spec_says
from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.fixes.data.drawing import batch_drawing, rest_got_faster
from advisors.verdict import Bottleneck

FIX = FixSpec(
    id="cache_decoded",
    title="Cache decoded samples",
    bottleneck=Bottleneck.DATA,
    applies_to="any",
    explanation="Decode each sample once and keep the decoded tensor: later epochs skip the decode entirely.",
    snippet="class Cached(Dataset):\n    def __init__(self, ds): self.ds, self.cache = ds, {}\n"
    "    def __len__(self): return len(self.ds)\n"
    "    def __getitem__(self, i):\n        if i not in self.cache: self.cache[i] = self.ds[i]\n"
    "        return self.cache[i]\nloader = DataLoader(Cached(ds), ...)",
    docs="https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    effort="code change",
    settings={"cache_decoded": True},
    alternatives=("dataloader_workers",),
    injection=Injection(const(cache_decoded=True), "cache_decoded", "dataloader"),
    done=spec_says(lambda s: s.cache_decoded),
    bound=batch_drawing,
    exceeded_why=rest_got_faster,
    examples=(FixExample(ON_CPU, knobs={"cache_decoded": True}),),
)
