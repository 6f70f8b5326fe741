"""Masked cumulative sum cumsum(x * mask) as one Triton row-scan kernel.

Idea: one program per row (32768 rows of 32768 floats) walks the row in 4096-float blocks, loads
x (fp32) and the bool mask (read as 1 byte per element through a uint8 view), forms x * mask in
registers, inclusive-scans the block with tl.cumsum, adds the running carry and stores.

Why it beats eager: eager runs mul (read x 4.3 GB + mask 1.07 GB, write 4.3 GB) and cumsum (read
4.3 GB, write 4.3 GB) = ~18.3 GB (~6.1 ms at ~3 TB/s). We read x and mask once and write once:
9.7 GB, ~3.2 ms bandwidth-bound, roughly 2x faster.

Note: x * mask is computed as x * float(mask), so NaN/inf under a False mask still propagate
exactly as in the reference.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _masked_cumsum_kernel(x_ptr, m_ptr, y_ptr, N, NBLK: tl.constexpr, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    carry = tl.full([], 0.0, tl.float32)
    for b in range(0, NBLK):
        cols = b * BLOCK + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        m = tl.load(m_ptr + base + cols, mask=mask, other=0, eviction_policy="evict_first")
        v = x * (m != 0).to(tl.float32)
        y = tl.cumsum(v, axis=0) + carry
        tl.store(y_ptr + base + cols, y, mask=mask, eviction_policy="evict_first")
        carry += tl.sum(v, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        if mask.shape != x.shape:
            mask = mask.expand(x.shape)
        dim = self.dim % x.dim()
        xt = x.movedim(dim, -1).contiguous()
        mt = mask.movedim(dim, -1).contiguous()
        if mt.dtype == torch.bool:
            mt = mt.view(torch.uint8)
        N = xt.shape[-1]
        y = torch.empty_like(xt)
        rows = xt.numel() // N if N > 0 else 0
        if rows > 0:
            BLOCK = min(4096, max(16, triton.next_power_of_2(N)))
            _masked_cumsum_kernel[(rows,)](xt, mt, y, N, NBLK=triton.cdiv(N, BLOCK), BLOCK=BLOCK,
                                           num_warps=8)
        return y.movedim(-1, dim)
