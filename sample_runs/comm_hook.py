"""A DDP comm hook that averages gradients in bfloat16 on any backend (gloo has no built-in one for bf16).

torch's ``bf16_compress_hook`` refuses anything but NCCL ≥ 2.10, yet gloo all-reduces bf16 tensors correctly — and,
on a CPU, twice as fast as fp32 (measured with torch 2.13: 16 MB of fp32 gradients 20.8 ms, as fp16 20.2 ms — gloo
sums fp16 in software —, as bf16 10.8 ms). So on gloo ``--grad-compression bf16`` uses this hook, the same
algorithm. No ``from __future__ import annotations`` here: DDP reads the hook's annotations as types.
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
