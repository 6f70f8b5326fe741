"""C = A @ B for symmetric A and B (4096 x 4096, fp32; symmetry is not needed, the product is computed in full) as one Triton GEMM on the tensor cores with 3xTF32 ("tf32x3").

Why it beats eager: torch.matmul in fp32 (TF32 off, PyTorch's default) runs cuBLAS SGEMM on the
non-tensor fp32 units: 137 GFLOP at ~51 TFLOP/s on an H100, ~2.7 ms. input_precision="tf32x3" splits
each fp32 operand into a TF32 high part and a TF32 residual and sums three tensor-core products, which
keeps fp32-level accuracy (relative error ~1e-6, about cuBLAS SGEMM's own against float64) at roughly
twice the speed. No TF32 shortcut: plain TF32 would be faster but ~1e-3 relative.

Tiles 128x128x64, 3 stages, 8 warps, grouped launch order (GROUP_M row tiles share B tiles in L2).
Rows/cols past M/N are wrapped with % so loads stay in bounds; stores are masked; the K tail is masked
only when K is not a multiple of BK.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K: tl.constexpr,
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
    a_ptrs = a_ptr + (rm % M).to(tl.int64)[:, None] * K + rk[None, :]          # A is (M, K), row-major
    b_ptrs = b_ptr + rk.to(tl.int64)[:, None] * N + (rn % N)[None, :]          # B is (K, N), row-major
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
        b_ptrs += BK * N
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    tl.store(c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], acc, mask=mask)


def matmul_tf32x3(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    BM, BN, BK = 128, 128, 64
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _gemm_kernel[grid](a, b, c, M, N, K=K, BM=BM, BN=BN, BK=BK, GROUP_M=8, num_stages=3, num_warps=8)
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return matmul_tf32x3(A, B)
