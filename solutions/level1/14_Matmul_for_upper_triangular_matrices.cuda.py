"""triu(A @ B) for upper-triangular A, B: a Triton tiled matmul that only does the non-zero work.

Idea: with A and B upper triangular, C[i, j] = sum_{k=i..j} A[i, k] B[k, j] for i <= j and 0 below the
diagonal. For an output tile (bi, bj) of BM x BM the useful k range is [bi*BM, (bj+1)*BM), so
  - tiles strictly below the block diagonal are written as zeros, with no loads at all;
  - tiles on/above it run their K loop over that range only (tl.dot, input_precision="tf32x3": three
    TF32 tensor-core products, about fp32 accuracy); diagonal tiles mask the lower half to zero.
Useful work is ~N^3/3 flops instead of 2 N^3 (1/6). Programs are ordered longest-K-range first (the
tile (0, T-1) with the full K range starts first, diagonal tiles last, zero tiles at the very end),
which keeps the 132 SMs evenly loaded.

Why it beats eager: eager runs a full fp32 SGEMM on CUDA cores (137 GFLOP, ~2.5-3 ms on H100 at
~50 TFLOP/s) plus a triu pass (read+write 64 MiB each). Here ~23 GFLOP of tf32x3 tensor-core work
(plus tile-granularity waste) -> expected ~0.3-0.5 ms, i.e. several times faster.

Caveat: the K-range restriction is exact only when A and B really are upper triangular, which is the
problem's contract (get_inputs builds them with torch.triu). For such inputs every skipped product
is an exact zero.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _tri_index(p):
    # (u, r) with u*(u+1)/2 <= p < (u+1)*(u+2)/2 and r = p - u*(u+1)/2, 0 <= r <= u
    u = ((tl.sqrt(8.0 * p.to(tl.float32) + 1.0) - 1.0) * 0.5).to(tl.int32)
    u = tl.where(u * (u + 1) // 2 > p, u - 1, u)
    u = tl.where((u + 1) * (u + 2) // 2 <= p, u + 1, u)
    return u, p - u * (u + 1) // 2


@triton.jit
def _triu_matmul_kernel(a_ptr, b_ptr, c_ptr, N, T,
                        BM: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr):
    pid = tl.program_id(0)
    n_upper = T * (T + 1) // 2
    offs = tl.arange(0, BM)
    if pid < n_upper:
        # upper tiles, ordered by decreasing distance d = bj - bi from the diagonal (longest first)
        u, r = _tri_index(pid)
        bi = r
        bj = r + (T - 1 - u)
        rows = bi * BM + offs
        cols = bj * BM + offs
        k_lo = bi * BM
        k_hi = tl.minimum((bj + 1) * BM, N)
        acc = tl.zeros((BM, BM), dtype=tl.float32)
        ks = tl.arange(0, BK)
        a_rows = a_ptr + rows[:, None].to(tl.int64) * N
        rmask = rows < N
        cmask = cols < N
        for k in range(k_lo, k_hi, BK):
            kk = k + ks
            kmask = kk < k_hi
            a = tl.load(a_rows + kk[None, :], mask=rmask[:, None] & kmask[None, :], other=0.0)
            b = tl.load(b_ptr + kk[:, None].to(tl.int64) * N + cols[None, :],
                        mask=kmask[:, None] & cmask[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PREC)
        acc = tl.where(rows[:, None] <= cols[None, :], acc, 0.0)
    else:
        # strictly lower tiles: zeros
        u, r = _tri_index(pid - n_upper)
        rows = (u + 1) * BM + offs
        cols = r * BM + offs
        acc = tl.zeros((BM, BM), dtype=tl.float32)
    c_offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    tl.store(c_ptr + c_offs, acc, mask=(rows < N)[:, None] & (cols < N)[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        N = A.shape[0]
        C = torch.empty((N, N), device=A.device, dtype=torch.float32)
        if N == 0:
            return C
        BM, BK = 128, 32
        T = triton.cdiv(N, BM)
        _triu_matmul_kernel[(T * T,)](A, B, C, N, T, BM=BM, BK=BK, PREC="tf32x3",
                                      num_warps=8, num_stages=3)
        return C
