"""Reverse cumulative sum (flip -> cumsum -> flip) as one Triton row-scan kernel.

Idea: one program per row (32768 rows of 32768 floats). It walks the row's 4096-float blocks from
the LAST to the first, computes a reverse inclusive scan of each block with
tl.cumsum(reverse=True), adds the running total of everything to its right (a scalar carry) and
stores in place order. No flipped copies are ever materialised.

Why it beats eager: eager runs flip (read 4.3 GB, write 4.3 GB), cumsum (read + write) and flip
again (read + write) = 6 passes = ~25.8 GB (~8.6 ms at ~3 TB/s). We read x once and write y once:
8.6 GB, ~2.9 ms bandwidth-bound, roughly 3x faster (more if eager's cumsum is below peak).

Accuracy: fp32 block scans + fp32 carry, same order of error as torch's fp32 scan.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rev_cumsum_kernel(x_ptr, y_ptr, N, NBLK: tl.constexpr, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    carry = tl.full([], 0.0, tl.float32)
    for b in range(0, NBLK):
        cols = (NBLK - 1 - b) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        y = tl.cumsum(x, axis=0, reverse=True) + carry
        tl.store(y_ptr + base + cols, y, mask=mask, eviction_policy="evict_first")
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        dim = self.dim % x.dim()
        xt = x.movedim(dim, -1).contiguous()
        N = xt.shape[-1]
        y = torch.empty_like(xt)
        rows = xt.numel() // N if N > 0 else 0
        if rows > 0:
            BLOCK = min(4096, max(16, triton.next_power_of_2(N)))
            _rev_cumsum_kernel[(rows,)](xt, y, N, NBLK=triton.cdiv(N, BLOCK), BLOCK=BLOCK,
                                        num_warps=8)
        return y.movedim(-1, dim)
