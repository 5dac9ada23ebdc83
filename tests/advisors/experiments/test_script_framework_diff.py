"""The change shown where a framework's user makes it: ``TrainingArguments(...)``, ``L.Trainer(...)``,
``Accelerator(...)``; one diff covering every site a knob acted on; never a diff of an installed library."""

from __future__ import annotations

from pathlib import Path

from advisors.experiments.script_diff import render, switch_for
from advisors.experiments.script_fixes import where_for
from advisors.fixes.context import ScriptContext
from advisors.fixes import FIXES

HF = """from transformers import Trainer, TrainingArguments
args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=8,
    bf16=False,
)
trainer = Trainer(model=model, args=args, train_dataset=ds)
trainer.train()
"""

LIGHTNING = """import lightning as L
trainer = L.Trainer(max_epochs=3, devices=1)
trainer.fit(model)
"""

ACCELERATE = """from accelerate import Accelerator
accelerator = Accelerator(gradient_accumulation_steps=2)
"""

GAN = """fake = G(z)
d_real = D(real)
d_fake = D(fake.detach())
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4)
loss = bce(D(G(z)), ones)
"""


def _site(f: Path, line: int, **extra: object) -> dict[str, object]:
    return {
        "file": str(f),
        "line": line,
        "code": f.read_text().splitlines()[line - 1].strip(),
        **extra,
    }


def test_trainer_fixes_are_training_arguments_fields(tmp_path: Path) -> None:
    f = tmp_path / "train.py"
    f.write_text(HF)
    trainer_line = _site(f, 8, via="transformers")
    ctx = ScriptContext(
        sites={
            "training_arguments": _site(f, 2, type="TrainingArguments"),
            "dataloader": trainer_line,
            "model_call": trainer_line,
        },
        loader={"num_workers": 0},
        cores=2,
        host_busy=0.3,
    )
    where = where_for(FIXES["dataloader_workers"], ctx)
    assert where is not None and where["line"] == 2 and where["target"] == "training_arguments"
    ch = render(
        FIXES["dataloader_workers"],
        {"num_workers": 4, "persistent_workers": True, "prefetch_factor": 4},
        "dataloader",
        where,
    )
    assert ch.kind == "diff" and ch.file == str(f)
    assert (
        "+    dataloader_num_workers=4,\n+    dataloader_persistent_workers=True,\n"
        "+    dataloader_prefetch_factor=4,\n )" in ch.text
    )
    bf16 = where_for(FIXES["bf16_autocast"], ctx)
    ch = render(FIXES["bf16_autocast"], {"autocast": "bf16"}, "model_call", bf16)
    assert (
        "-    bf16=False,\n+    bf16=True,\n" in ch.text
    )  # the user's own keyword, its value replaced
    compiled = render(
        FIXES["torch_compile"],
        {"compile": True},
        "model_call",
        where_for(FIXES["torch_compile"], ctx),
    )
    assert "+    torch_compile=True,\n" in compiled.text
    assert f.read_text() == HF  # only read


def test_a_site_a_library_built_without_a_known_switch_is_a_snippet(tmp_path: Path) -> None:
    f = tmp_path / "train.py"
    f.write_text(HF)
    site = _site(f, 8, via="transformers")
    ch = render(FIXES["channels_last"], {"channels_last": True}, "model_call", site)
    assert ch.kind == "snippet" and "transformers builds this inside your call" in ch.text
    ch = render(FIXES["foreach_optimizer"], {"optimizer_impl": "foreach"}, "optimizer", site)
    assert ch.kind == "snippet"  # never foreach=True added to trainer.train()


def test_lightning_and_accelerate_precision_at_their_own_switch(tmp_path: Path) -> None:
    f = tmp_path / "fit.py"
    f.write_text(LIGHTNING)
    ctx = ScriptContext(sites={"lightning_trainer": _site(f, 2), "model_call": _site(f, 3)})
    ch = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        where_for(FIXES["bf16_autocast"], ctx),
    )
    assert "+trainer = L.Trainer(max_epochs=3, devices=1, precision='bf16-mixed')" in ch.text
    g = tmp_path / "acc.py"
    g.write_text(ACCELERATE)
    ctx = ScriptContext(sites={"accelerator": _site(g, 2)})
    ch = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        where_for(FIXES["bf16_autocast"], ctx),
    )
    assert (
        "+accelerator = Accelerator(gradient_accumulation_steps=2, mixed_precision='bf16')"
        in ch.text
    )
    assert (
        switch_for({"num_workers": 4}, ctx.sites) is None
    )  # accelerate's switch has no loader knobs


def test_one_diff_covers_every_model_call_and_every_optimizer(tmp_path: Path) -> None:
    f = tmp_path / "gan.py"
    f.write_text(GAN)
    calls = [_site(f, n) for n in (1, 2, 3, 6)]
    ctx = ScriptContext(
        sites={"model_call": calls[0], "optimizer": _site(f, 4)},
        all_sites={"model_call": calls, "optimizer": [_site(f, 4), _site(f, 5)]},
    )
    where = where_for(FIXES["bf16_autocast"], ctx)
    assert where is not None and [s["line"] for s in where["all"]] == [1, 2, 3, 6]
    ch = render(FIXES["bf16_autocast"], {"autocast": "bf16"}, "model_call", where)
    assert ch.text.count("+with torch.autocast(device_type='cpu', dtype=torch.bfloat16):") == 4
    assert (
        "+    d_fake = D(fake.detach())" in ch.text and "+    loss = bce(D(G(z)), ones)" in ch.text
    )
    assert len(ch.sites) == 4
    opt = render(
        FIXES["fused_optimizer"],
        {"optimizer_impl": "fused"},
        "optimizer",
        where_for(FIXES["fused_optimizer"], ctx),
    )
    assert opt.text.count("fused=True)") == 2


def test_no_diff_ever_touches_an_installed_library(tmp_path: Path) -> None:
    lib = tmp_path / "lib" / "python3.11" / "site-packages" / "transformers" / "trainer.py"
    lib.parent.mkdir(parents=True)
    lib.write_text("loader = DataLoader(ds, batch_size=8)\n")
    ch = render(FIXES["dataloader_workers"], {"num_workers": 4}, "dataloader", _site(lib, 1))
    assert ch.kind == "snippet" and "+loader" not in ch.text


MINGPT = """class Trainer:
    def __init__(self, config, model):
        self.model = model
        self.device = config.device
        if self.device == 'auto':
            self.device = 'cuda' if torch.cuda.is_available() else 'cpu'

    def run(self):
        logits, self.loss = self.model(x, y)
"""
DOUBLE_QUOTED = """from accelerate import Accelerator
accelerator = Accelerator(log_with="all", project_dir="out")
"""


def test_a_diff_speaks_the_files_own_idiom(tmp_path: Path) -> None:
    """Issue 42: minGPT's autocast diff hard-coded ``device_type='cpu'`` beside its ``self.device``; the accelerate
    diff wrote ``mixed_precision='bf16'`` in a file of double quotes."""
    f = tmp_path / "trainer.py"
    f.write_text(MINGPT)
    ch = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        {**_site(f, 9), "target": "model_call"},
    )
    assert (
        "+        with torch.autocast(device_type=self.device, dtype=torch.bfloat16):" in ch.text
    ), ch.text
    g = tmp_path / "acc.py"
    g.write_text(DOUBLE_QUOTED)
    ctx = ScriptContext(sites={"accelerator": _site(g, 2)})
    ch = render(
        FIXES["bf16_autocast"],
        {"autocast": "bf16"},
        "model_call",
        where_for(FIXES["bf16_autocast"], ctx),
    )
    assert 'mixed_precision="bf16")' in ch.text and "'bf16'" not in ch.text
