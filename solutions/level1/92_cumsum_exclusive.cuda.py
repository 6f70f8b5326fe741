"""Exclusive cumulative sum (zeros column ++ cumsum of x[..., :-1]) as one Triton row-scan kernel.

Semantics: output has the SAME shape as x; y[:, 0] = 0 and y[:, j] = sum(x[:, :j]) (the last
input column is never used by the reference).

Idea: one program per row (32768 rows of 32768 floats) walks the row in 4096-float blocks,
inclusive-scans each block with tl.cumsum, adds the running carry and subtracts x itself to make
the scan exclusive (keeps 16-byte aligned vector loads, unlike loading x shifted by one), then
stores. One read and one write per element.

Why it beats eager: eager runs cumsum on the narrowed view (read 4.3 GB, write 4.3 GB; may also
copy the non-contiguous narrow first), zeros_like (tiny) and cat (read 4.3 GB, write 4.3 GB) =
>= 4 passes = >= 17 GB (~5.7 ms at ~3 TB/s). We move 8.6 GB, ~2.9 ms, roughly 2x faster.

Caveat: (inclusive - x) rounds differently from a direct exclusive scan by ~1 ulp of the running
sum (~1e-7 relative), far inside the tolerance. A non-finite x[:, -1] would leak into y[:, -1]
(inf - inf), which the reference ignores; random inputs are finite.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _excl_cumsum_kernel(x_ptr, y_ptr, N, NBLK: tl.constexpr, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    carry = tl.full([], 0.0, tl.float32)
    for b in range(0, NBLK):
        cols = b * BLOCK + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        y = (tl.cumsum(x, axis=0) - x) + carry
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
            _excl_cumsum_kernel[(rows,)](xt, y, N, NBLK=triton.cdiv(N, BLOCK), BLOCK=BLOCK,
                                         num_warps=8)
        return y.movedim(-1, dim)
