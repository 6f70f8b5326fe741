"""CUDA solution: one block per row; each thread sums a contiguous segment, a warp-shuffle block scan
of the segment totals gives each thread its offset, and a second pass writes the prefix sums."""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The kernel sees raw pointers and a stream; _cumsum_rows checks and allocates the tensors. Neither file includes
# torch's C++ headers, most of a load_inline build's time (the .cu's parse by cudafe++, cicc and the host compiler).
_cpp = r"""
#include <pybind11/pybind11.h>
#include <cstdint>
int cumsum_rows(std::uintptr_t x, std::uintptr_t y, std::int64_t rows, std::int64_t cols, std::uintptr_t stream);
"""

_cuda = r"""
#include <cuda_runtime.h>
#include <cstdint>

__global__ void cumsum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float warp_totals[32];
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    const int64_t per = (cols + blockDim.x - 1) / blockDim.x;
    int64_t begin = (int64_t)threadIdx.x * per;
    if (begin > cols) begin = cols;
    int64_t end = begin + per;
    if (end > cols) end = cols;
    float total = 0.f;
    for (int64_t i = begin; i < end; ++i) total += row[i];
    // inclusive scan of the totals within the warp
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float scan = total;
    for (int o = 1; o < 32; o <<= 1) { float v = __shfl_up_sync(0xffffffff, scan, o); if (lane >= o) scan += v; }
    if (lane == 31) warp_totals[warp] = scan;
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x >> 5;
        float w = lane < warps ? warp_totals[lane] : 0.f;
        for (int o = 1; o < 32; o <<= 1) { float v = __shfl_up_sync(0xffffffff, w, o); if (lane >= o) w += v; }
        if (lane < warps) warp_totals[lane] = w;  // inclusive prefix over warps
    }
    __syncthreads();
    float running = scan - total + (warp > 0 ? warp_totals[warp - 1] : 0.f);  // exclusive offset of this thread
    for (int64_t i = begin; i < end; ++i) { running += row[i]; out[i] = running; }
}

// x, y: contiguous float32 (rows, cols). Returns the launch's cudaError_t (0: success).
int cumsum_rows(std::uintptr_t x, std::uintptr_t y, std::int64_t rows, std::int64_t cols, std::uintptr_t stream) {
    if (rows == 0 || cols == 0) return 0;
    cumsum_rows_kernel<<<(unsigned)rows, 1024, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), cols);
    return (int)cudaGetLastError();
}
"""

# No implicit torch headers where this torch can leave them out (2.7 and later).
_LIGHT = {"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(load_inline).parameters else {}

_ext = load_inline(name="kb_mini_cumsum_rows_cuda", cpp_sources=_cpp, cuda_sources=_cuda,
                   functions=["cumsum_rows"], with_pytorch_error_handling=False,
                   extra_cuda_cflags=["-O3"], verbose=False, **_LIGHT)


def _cumsum_rows(x):
    """Inclusive prefix sums along the last dimension of a float32 CUDA tensor; returns a new contiguous tensor."""
    if x.dtype != torch.float32 or not x.is_cuda:
        raise TypeError("cumsum_rows: float32 CUDA input expected")
    x = x.contiguous()
    y = torch.empty_like(x)
    cols = x.size(-1)
    rows = x.numel() // cols if cols else 0
    with torch.cuda.device(x.device):
        err = _ext.cumsum_rows(x.data_ptr(), y.data_ptr(), rows, cols, torch.cuda.current_stream().cuda_stream)
    if err:
        raise RuntimeError(f"cumsum_rows: CUDA error {err}")
    return y


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if self.dim % x.dim() != x.dim() - 1:  # the kernel scans the last dimension
            return _cumsum_rows(x.movedim(self.dim, -1)).movedim(-1, self.dim)
        return _cumsum_rows(x)
