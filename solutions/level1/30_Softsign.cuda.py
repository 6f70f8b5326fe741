"""Softsign (x / (1 + |x|)) as one fused Triton elementwise pass.

Idea: each program handles a contiguous block of 4096 floats (int64 offsets: the real input has
4096*393216 = 1.6e9 elements) and writes y = x / (1 + |x|).

Why it beats eager: eager runs 3 kernels - abs (read x, write a), add 1 (read a, write b) and
div (read x and b, write y) - i.e. 7 passes over 6.4 GB = ~45 GB of traffic (~15 ms at ~3 TB/s).
This kernel reads x once and writes y once: 12.9 GB, ~4.3 ms bandwidth-bound, ~3.5x faster.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softsign_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    y = x / (1.0 + tl.abs(x))
    tl.store(y_ptr + offs, y, mask=mask, eviction_policy="evict_first")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return y
        BLOCK = 4096
        _softsign_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=8)
        return y
