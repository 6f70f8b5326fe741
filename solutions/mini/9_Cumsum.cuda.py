"""CUDA solution: one block per row; each thread sums a contiguous segment, a warp-shuffle block scan
of the segment totals gives each thread its offset, and a second pass writes the prefix sums. Sums are
kept in double: a float32 scan in another order than torch's differs from it by up to about 1.3e-4 on
this problem's rows (KernelBench holds float32 to 1e-4)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

cudaError_t cumsum_rows_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

torch::Tensor cumsum_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "float32 CUDA input expected");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1), rows = cols ? xc.numel() / cols : 0;
    if (rows == 0 || cols == 0) return y;
    const cudaError_t err = cumsum_rows_launch(xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols,
                                               at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "cumsum_rows: ", cudaGetErrorString(err));
    return y;
}
"""

_cuda = r"""
#include <cuda_runtime.h>
#include <cstdint>

__global__ void cumsum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ double warp_totals[32];
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    const int64_t per = (cols + blockDim.x - 1) / blockDim.x;
    int64_t begin = (int64_t)threadIdx.x * per;
    if (begin > cols) begin = cols;
    int64_t end = begin + per;
    if (end > cols) end = cols;
    double total = 0.0;
    for (int64_t i = begin; i < end; ++i) total += row[i];
    // inclusive scan of the totals within the warp
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    double scan = total;
    for (int o = 1; o < 32; o <<= 1) { double v = __shfl_up_sync(0xffffffff, scan, o); if (lane >= o) scan += v; }
    if (lane == 31) warp_totals[warp] = scan;
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x >> 5;
        double w = lane < warps ? warp_totals[lane] : 0.0;
        for (int o = 1; o < 32; o <<= 1) { double v = __shfl_up_sync(0xffffffff, w, o); if (lane >= o) w += v; }
        if (lane < warps) warp_totals[lane] = w;  // inclusive prefix over warps
    }
    __syncthreads();
    double running = scan - total + (warp > 0 ? warp_totals[warp - 1] : 0.0);  // exclusive offset of this thread
    for (int64_t i = begin; i < end; ++i) { running += row[i]; out[i] = (float)running; }
}

// Launches the kernel for this shape on the caller's stream; the launch's own error, if any.
cudaError_t cumsum_rows_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    cumsum_rows_kernel<<<(unsigned)rows, 1024, 0, stream>>>(x, y, cols);
    return cudaGetLastError();
}
"""

_ext = load_inline(name="kb_mini_cumsum_rows_cuda", cpp_sources=_cpp, cuda_sources=_cuda,
                   functions=["cumsum_rows"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if self.dim % x.dim() != x.dim() - 1:  # the kernel scans the last dimension
            return _ext.cumsum_rows(x.movedim(self.dim, -1)).movedim(-1, self.dim)
        return _ext.cumsum_rows(x)
