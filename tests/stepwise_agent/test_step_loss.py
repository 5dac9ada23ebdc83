"""A step's loss is the sum of the losses backpropagated since the last step (stepwise_agent.steps): under
gradient accumulation, where each micro-batch's loss is divided by k, that is the whole batch's loss, not 1/k of
it (Hugging Face's Trainer, Lightning and nanoGPT all divide; the last micro-batch alone read as a loss k times
lower, and an accumulation arm as "at the target from step 0")."""

from __future__ import annotations

import pytest


def _losses(k: int, steps: int = 3) -> list[float | None]:
    import torch

    from stepwise_agent.steps import StepDetector

    seen: list[float | None] = []
    detector = StepDetector(lambda loss, samples: seen.append(loss))
    detector.install()
    try:
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.ones(4))
        opt = torch.optim.SGD([w], lr=0.01)
        for _ in range(steps):
            for micro in range(k):
                x = torch.full((4,), float(micro + 1))
                (
                    (x @ w) / k
                ).backward()  # micro-batch losses 4, 8, 12, 16 (w = 1), each divided by k
            opt.step()
            opt.zero_grad()
            with torch.no_grad():
                w.fill_(1.0)  # the same losses every step
    finally:
        detector.uninstall()
    return seen


@pytest.mark.parametrize("k", [1, 4])
def test_a_step_s_loss_is_the_whole_batch_s_under_accumulation(k: int) -> None:
    expected = (
        sum(4.0 * (m + 1) for m in range(k)) / k
    )  # the mean of the micro-batches' undivided losses
    assert _losses(k) == pytest.approx([expected] * 3)


def test_a_loss_scaled_by_a_grad_scaler_is_read_unscaled() -> None:
    """``scaler.scale(loss).backward()`` (fp16 on CUDA; a CPU GradScaler scales the same way) backpropagates
    65536 x the loss: the step's loss is the loss."""
    import torch

    from stepwise_agent.steps import StepDetector

    seen: list[float | None] = []
    detector = StepDetector(lambda loss, samples: seen.append(loss))
    detector.install()
    try:
        w = torch.nn.Parameter(torch.ones(4))
        opt = torch.optim.SGD([w], lr=1e-6)
        scaler = torch.amp.GradScaler("cpu")
        assert scaler.is_enabled()
        for _ in range(3):
            loss = torch.full((4,), 2.0) @ w  # 8.0 at w = 1
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            with torch.no_grad():
                w.fill_(1.0)
    finally:
        detector.uninstall()
    assert seen == pytest.approx([8.0] * 3)
