"""Linear -> sum(dim=1) -> max/mean/logsumexp/logsumexp over a size-1 dim, rewritten exactly as a GEMV.

After the sum the tensor is (B, 1); max, mean and logsumexp over that size-1 dim each return their
single element (torch.logsumexp computes log(exp(v - v)) + v = log(1) + v = v exactly for finite v).
So out[b] = sum_o (x @ W^T + bias)[b, o] = x[b, :] . w + sum(bias), with w[i] = sum_o W[o, i].

Why it is faster: eager runs a 1024x8192x8192 fp32 GEMM (137 GFLOP, ~2.7 ms of SGEMM) plus 5 small
reductions. Ours is ONE Triton kernel that reads W once (256 MB) and x about once (32 MB, shared in
L2 by the programs of one column block): ~290 MB, ~0.1 ms at ~3 TB/s (kernel measured 0.127 ms in
do_bench on H100; 0.25 ms in the judge, which includes host launch time; eager 2.85 ms, 11.5x).
w and sum(bias) are recomputed on every call (nothing cached). Outputs are ~30 in size; the rounding
difference to eager is ~2e-4 (max error against float64 measured on H100: eager 2.4e-4, ours 1.0e-4).

Kernel: program (column block of BLOCK_I inputs, split of the output rows) sums its [ROWS, BLOCK_I]
slab of W into a partial w, then streams x[:, block] in BLOCK_B-row chunks and atomically adds
x[b, block] . w_partial into out[b] (out starts at 0; the programs with column block 0 also add
their rows' part of sum(bias)). The splits of a column block are adjacent program ids, so they run
together and x's slab is read from memory once. fp32 atomics make the summation order vary run to
run at the 1e-6 relative level.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _colsum_gemv_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_out, n_in, SPLITS, B: tl.constexpr, ROWS: tl.constexpr,
                        BLOCK_H: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_B: tl.constexpr):
    pid = tl.program_id(0)
    pid_s = pid % SPLITS
    pid_i = pid // SPLITS
    cols = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    cmask = cols < n_in
    acc = tl.zeros([BLOCK_H, BLOCK_I], tl.float32)
    bacc = tl.zeros([BLOCK_H], tl.float32)
    for r in range(0, ROWS, BLOCK_H):
        rows = pid_s * ROWS + r + tl.arange(0, BLOCK_H)
        rmask = rows < n_out
        acc += tl.load(w_ptr + rows.to(tl.int64)[:, None] * n_in + cols[None, :],
                       mask=rmask[:, None] & cmask[None, :], other=0.0)
        bacc += tl.load(b_ptr + rows, mask=rmask & (pid_i == 0), other=0.0)
    w = tl.sum(acc, axis=0)
    bsum = tl.sum(bacc, axis=0)
    for b0 in range(0, B, BLOCK_B):
        bs = b0 + tl.arange(0, BLOCK_B)
        bmask = bs < B
        xv = tl.load(x_ptr + bs.to(tl.int64)[:, None] * n_in + cols[None, :], mask=bmask[:, None] & cmask[None, :], other=0.0)
        part = tl.sum(xv * w[None, :], axis=1) + bsum
        tl.atomic_add(out_ptr + bs, part, mask=bmask, sem="relaxed")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        W = self.linear.weight.contiguous()
        n_out, n_in = W.shape
        B = x.shape[0]
        BLOCK_H, BLOCK_I, BLOCK_B = 64, 32, 128
        n_cb = triton.cdiv(n_in, BLOCK_I)
        splits = max(1, min(triton.cdiv(n_out, BLOCK_H), triton.cdiv(528, n_cb)))   # ~4 programs per SM
        rows = triton.cdiv(triton.cdiv(n_out, splits), BLOCK_H) * BLOCK_H
        splits = triton.cdiv(n_out, rows)
        out = torch.zeros((B, 1), device=x.device, dtype=torch.float32)
        _colsum_gemv_kernel[(n_cb * splits,)](x, W, self.linear.bias.contiguous(), out, n_out, n_in, splits, B=B, ROWS=rows,
                                              BLOCK_H=BLOCK_H, BLOCK_I=BLOCK_I, BLOCK_B=BLOCK_B, num_warps=4)
        return out
