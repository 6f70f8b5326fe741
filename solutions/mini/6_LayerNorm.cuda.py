"""CUDA solution: one block per row, mean and variance by warp-shuffle block reductions, affine fused in the write."""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The kernel sees raw pointers and a stream; ModelNew checks and allocates the tensors. Neither file includes torch's
# C++ headers, most of a load_inline build's time (the .cu's parse by cudafe++, cicc and the host compiler).
_cpp = r"""
#include <pybind11/pybind11.h>
#include <cstdint>
int layer_norm_rows(std::uintptr_t x, std::uintptr_t w, std::uintptr_t b, std::uintptr_t y, std::int64_t rows,
                    std::int64_t cols, double eps, std::uintptr_t stream);
"""

_cuda = r"""
#include <cuda_runtime.h>
#include <cstdint>

__device__ float block_sum(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    __syncthreads();  // shared may still be read from the previous reduction
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;  // every thread holds the block total
}

__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                  float* __restrict__ y, int64_t cols, float eps) {
    __shared__ float shared[32];
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += row[i];
    const float mean = block_sum(s, shared) / cols;
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) { float d = row[i] - mean; q += d * d; }
    const float rstd = rsqrtf(block_sum(q, shared) / cols + eps);
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) out[i] = (row[i] - mean) * rstd * w[i] + b[i];
}

// x, y: contiguous float32 (rows, cols); w, b: contiguous float32 (cols). Returns the launch's cudaError_t (0: success).
int layer_norm_rows(std::uintptr_t x, std::uintptr_t w, std::uintptr_t b, std::uintptr_t y, std::int64_t rows,
                    std::int64_t cols, double eps, std::uintptr_t stream) {
    if (rows == 0) return 0;
    const int threads = cols >= 1024 ? 1024 : (int)((cols + 31) / 32 * 32);
    layer_norm_kernel<<<(unsigned)rows, threads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(w), reinterpret_cast<const float*>(b),
        reinterpret_cast<float*>(y), cols, (float)eps);
    return (int)cudaGetLastError();
}
"""

# No implicit torch headers where this torch can leave them out (2.7 and later).
_LIGHT = {"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(load_inline).parameters else {}

_ext = load_inline(name="kb_mini_layer_norm_cuda", cpp_sources=_cpp, cuda_sources=_cuda,
                   functions=["layer_norm_rows"], with_pytorch_error_handling=False,
                   extra_cuda_cflags=["-O3"], verbose=False, **_LIGHT)


def _float32_cuda(*tensors):
    for t in tensors:
        if t.dtype != torch.float32 or not t.is_cuda:
            raise TypeError("layer_norm_rows: float32 CUDA tensors expected")
    return [t.contiguous() for t in tensors]


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=eps)
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.5 * torch.randn(dim))
            self.ln.bias.copy_(0.5 * torch.randn(dim))

    def forward(self, x):
        x, w, b = _float32_cuda(x, self.ln.weight, self.ln.bias)
        cols = w.numel()
        if cols == 0 or x.numel() % cols != 0 or b.numel() != cols:
            raise ValueError("layer_norm_rows: weight and bias must match the last dimension")
        y = torch.empty_like(x)
        rows = x.numel() // cols
        with torch.cuda.device(x.device):
            err = _ext.layer_norm_rows(x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr(), rows, cols, float(self.ln.eps),
                                       torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"layer_norm_rows: CUDA error {err}")
        return y
