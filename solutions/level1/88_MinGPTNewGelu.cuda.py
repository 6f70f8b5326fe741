"""minGPT "new GELU" (tanh approximation) as one fused Triton elementwise pass.

Idea: 0.5*x*(1 + tanh(u)) == x * sigmoid(2u) == x / (1 + exp(-2u)) exactly (algebraically), with
u = sqrt(2/pi) * (x + 0.044715 x^3). One program per 4096-float block (int64 offsets), one exp,
one divide per element.

Why it beats eager: eager runs ~7 kernels (pow, mul, add, mul, tanh, add, mul, mul - the scalar
0.5*x is folded into one of them), each reading/writing the full 8192x8192 fp32 tensor (268 MB):
~17 passes = ~4.6 GB of traffic (~1.5 ms at ~3 TB/s). This kernel reads x and writes y once:
537 MB, ~0.18 ms bandwidth-bound, roughly 6-8x faster.

Caveat: exp(-2u) overflows to inf for very negative x, giving x/inf = -0.0, which matches the
reference's limit (tanh -> -1). Rounding differs from torch.tanh by a few ulps only.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

_K = math.sqrt(2.0 / math.pi)


@triton.jit
def _new_gelu_kernel(x_ptr, y_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    u = K * (x + 0.044715 * x * x * x)
    y = x / (1.0 + tl.exp(-2.0 * u))
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
        _new_gelu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, K=_K, BLOCK=BLOCK, num_warps=8)
        return y
