"""TripletMarginLoss (margin from init, p=2, eps=1e-6, swap=False, mean): 2 Triton kernels.

Semantics (torch): d(x, y) = || x - y + eps ||_2 over the last dim (pairwise_distance adds eps
to the difference), loss_i = max(margin + d(a_i, p_i) - d(a_i, n_i), 0), result = mean_i loss_i
(0-dim).

Idea: one program per row (32768 rows of 8192 floats) streams a, p and n once in 4096-float
blocks, accumulates both squared distances in fp32 vectors, tree-reduces them, and writes the
row's loss; a 1-program kernel averages the 32768 row losses into the 0-dim output.

Why it beats eager: eager computes each distance as sub (read 2, write 1), add eps (read 1,
write 1) and norm (read 1) = 6 passes over 1.07 GB, twice: ~12.9 GB (~4.3 ms at ~3 TB/s), plus
tiny ops. We read a, p, n once: 3.2 GB, ~1.1 ms bandwidth-bound, roughly 4x faster.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _triplet_rows_kernel(a_ptr, p_ptr, n_ptr, loss_ptr, D, margin, eps,
                         NBLK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * D
    acc_p = tl.zeros([BLOCK], dtype=tl.float32)
    acc_n = tl.zeros([BLOCK], dtype=tl.float32)
    for b in range(0, NBLK):
        cols = b * BLOCK + tl.arange(0, BLOCK)
        mask = cols < D
        a = tl.load(a_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        p = tl.load(p_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        n = tl.load(n_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        dp = tl.where(mask, a - p + eps, 0.0)
        dn = tl.where(mask, a - n + eps, 0.0)
        acc_p += dp * dp
        acc_n += dn * dn
    d_pos = tl.sqrt(tl.sum(acc_p, axis=0))
    d_neg = tl.sqrt(tl.sum(acc_n, axis=0))
    tl.store(loss_ptr + row, tl.maximum(margin + d_pos - d_neg, 0.0))


@triton.jit
def _mean_kernel(x_ptr, out_ptr, m: tl.constexpr, scale, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, m, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < m, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, margin=1.0):
        super().__init__()
        self.margin = float(margin)
        self.eps = 1e-6  # nn.TripletMarginLoss default

    def forward(self, anchor, positive, negative):
        shape = torch.broadcast_shapes(anchor.shape, positive.shape, negative.shape)
        D = shape[-1]
        a = anchor.expand(shape).reshape(-1, D).contiguous()
        p = positive.expand(shape).reshape(-1, D).contiguous()
        n = negative.expand(shape).reshape(-1, D).contiguous()
        rows = a.shape[0]
        dev = a.device
        BLOCK = min(4096, max(16, triton.next_power_of_2(D)))
        losses = torch.empty(rows, dtype=torch.float32, device=dev)
        _triplet_rows_kernel[(rows,)](a, p, n, losses, D, self.margin, self.eps,
                                      NBLK=triton.cdiv(D, BLOCK), BLOCK=BLOCK, num_warps=8)
        out = torch.empty((), dtype=torch.float32, device=dev)
        _mean_kernel[(1,)](losses, out, rows, 1.0 / rows, BLOCK=1024, num_warps=4)
        return out
