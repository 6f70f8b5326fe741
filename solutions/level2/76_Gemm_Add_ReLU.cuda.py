"""Linear (no bias) -> + bias -> ReLU as ONE Triton GEMM kernel (3xTF32 tensor-core dot) whose
epilogue adds the bias and applies the ReLU before the single store.

Why it is faster: eager runs cuBLAS fp32 SGEMM for 1024x8192x8192 (137 GFLOP on the non-tensor fp32
units, ~2.7 ms on an H100) and then the bias add and the ReLU: 2 more kernels, each a read+write of
the 32 MB output. Here the product runs on the tensor cores with input_precision="tf32x3" (fp32
operands split into TF32 high and residual parts, three products: fp32-level accuracy) and the output
is written once. Same kernel as solutions/level2/12_Gemm_Multiply_LeakyReLU.cuda.py (measured there at
1.79x on the H100), with this problem's epilogue.

Tiles: 128x128x64, 3 stages, 8 warps, grouped program order (GROUP_M row tiles share W tiles in L2).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_bias_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K: tl.constexpr,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    gsz = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % gsz
    pid_n = (pid % group) // gsz
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = x_ptr + (rm % M).to(tl.int64)[:, None] * K + rk[None, :]
    b_ptrs = w_ptr + (rn % N).to(tl.int64)[None, :] * K + rk[:, None]      # W is (N, K): a K-major B tile
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        if K % BK == 0:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        a_ptrs += BK
        b_ptrs += BK
    nmask = rn < N
    v = acc + tl.load(b_ptr + rn, mask=nmask, other=0.0)[None, :]
    v = tl.maximum(v, 0.0)
    tl.store(y_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], v, mask=(rm < M)[:, None] & nmask[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous()
        w = self.gemm.weight.contiguous()
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=torch.float32)
        BM, BN, BK = 128, 128, 64
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        _gemm_bias_relu_kernel[grid](x, w, self.bias.contiguous(), y, M, N, K=K,
                                     BM=BM, BN=BN, BK=BK, GROUP_M=8, num_stages=3, num_warps=8)
        return y
