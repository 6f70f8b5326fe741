"""Swish (x * sigmoid(x)) as one fused Triton elementwise pass.

Idea: each program handles a contiguous block of 4096 floats (int64 offsets: the real input has
4096*393216 = 1.6e9 elements, beyond int32 range) and writes y = x / (1 + exp(-x)).

Why it beats eager: eager runs 2 kernels - sigmoid (read x, write s) and mul (read x and s,
write y) - i.e. 5 passes over 6.4 GB = ~32 GB of traffic (~10.7 ms at ~3 TB/s).
This kernel reads x once and writes y once: 12.9 GB, ~4.3 ms bandwidth-bound, ~2.5x faster.

Caveat: x very negative gives exp(-x) = inf and y = x/inf = -0.0, which matches x*sigmoid(x).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _swish_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    y = x / (1.0 + tl.exp(-x))
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
        _swish_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=8)
        return y
