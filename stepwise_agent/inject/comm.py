"""A DDP comm hook that averages gradients in bfloat16 on any backend (gloo has no built-in one for bf16).

It lives in the agent because the injector registers it in the user's process; the sample workloads' script keeps
its own copy (``sample_runs.comm_hook``), since a training script imports nothing of Stepwise.
"""

import torch
import torch.distributed as dist
from torch.futures import Future


def bf16_allreduce_hook(process_group: object, bucket: dist.GradBucket) -> Future[torch.Tensor]:
    """Average the bucket in bfloat16 (half the bytes of fp32), then write it back in the gradients' dtype."""
    group = process_group if process_group is not None else dist.group.WORLD
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16).div_(dist.get_world_size(group))  # type: ignore[arg-type]
    fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(done: Future[list[torch.Tensor]]) -> torch.Tensor:
        buffer.copy_(done.value()[0])
        return buffer

    return fut.then(decompress)
