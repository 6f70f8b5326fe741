"""CUDA solution: row-wise sum, float4 loads, warp-shuffle reduction (one warp or one block per row)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <vector>

cudaError_t row_sum_launch(const float* xp, float* op, int64_t rows, int64_t cols, cudaStream_t stream);

torch::Tensor row_sum_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "row_sum_cuda: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "row_sum_cuda: x must be float32");
    TORCH_CHECK(x.dim() >= 1, "row_sum_cuda: x must have at least one dimension");
    const at::cuda::OptionalCUDAGuard device_guard(device_of(x));
    auto xc = x.contiguous();
    const int64_t cols = xc.size(-1);
    std::vector<int64_t> out_sizes(xc.sizes().begin(), xc.sizes().end() - 1);
    if (cols == 0) return torch::zeros(out_sizes, xc.options());
    auto out = torch::empty(out_sizes, xc.options());
    const int64_t rows = xc.numel() / cols;
    if (rows == 0) return out;
    const cudaError_t err = row_sum_launch(xc.data_ptr<float>(), out.data_ptr<float>(), rows, cols, at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "row_sum_cuda: ", cudaGetErrorString(err));
    return out;
}
"""

_cuda_source = r"""
#include <cuda_runtime.h>
#include <cstdint>
#include <vector>

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Partial sum of row[lane], row[lane + step], ... (float4 loads when VEC).
template <bool VEC>
__device__ __forceinline__ float partial_row_sum(const float* __restrict__ row, int64_t cols, int start, int step) {
    float acc0 = 0.f, acc1 = 0.f;
    if (VEC) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        const int64_t n4 = cols >> 2;
        int64_t i = start;
        for (; i + step < n4; i += 2 * step) {          // two independent loads in flight
            const float4 a = __ldg(row4 + i);
            const float4 b = __ldg(row4 + i + step);
            acc0 += (a.x + a.y) + (a.z + a.w);
            acc1 += (b.x + b.y) + (b.z + b.w);
        }
        if (i < n4) {
            const float4 a = __ldg(row4 + i);
            acc0 += (a.x + a.y) + (a.z + a.w);
        }
        for (int64_t j = (n4 << 2) + start; j < cols; j += step) acc1 += __ldg(row + j);
    } else {
        for (int64_t j = start; j < cols; j += step) acc0 += __ldg(row + j);
    }
    return acc0 + acc1;
}

// One warp per row (short rows): blockDim = (32, WARPS).
template <bool VEC>
__global__ void row_sum_warp_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    const int64_t row = (int64_t)blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    float v = partial_row_sum<VEC>(x + row * cols, cols, threadIdx.x, 32);
    v = warp_sum(v);
    if (threadIdx.x == 0) out[row] = v;
}

// One block per row (long rows); blockDim.x is a multiple of 32, at most 1024.
template <bool VEC>
__global__ void row_sum_block_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    __shared__ float warp_partials[32];
    const int64_t row = blockIdx.x;
    if (row >= rows) return;  // uniform over the block
    float v = partial_row_sum<VEC>(x + row * cols, cols, threadIdx.x, blockDim.x);
    v = warp_sum(v);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) warp_partials[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = blockDim.x >> 5;
        v = lane < nwarps ? warp_partials[lane] : 0.f;
        v = warp_sum(v);
        if (lane == 0) out[row] = v;
    }
}

// Launches the kernel for this shape on the caller's stream; the launch's own error, if any.
cudaError_t row_sum_launch(const float* xp, float* op, int64_t rows, int64_t cols, cudaStream_t stream) {
    // float4 loads need every row start 16-byte aligned
    const bool vec = (cols % 4 == 0) && ((reinterpret_cast<uintptr_t>(xp) & 15) == 0);
    if (cols <= 1024) {
        const int warps_per_block = 8;
        dim3 block(32, warps_per_block);
        const int64_t blocks = (rows + warps_per_block - 1) / warps_per_block;
        if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
        if (vec) row_sum_warp_kernel<true><<<(unsigned)blocks, block, 0, stream>>>(xp, op, rows, cols);
        else     row_sum_warp_kernel<false><<<(unsigned)blocks, block, 0, stream>>>(xp, op, rows, cols);
    } else {
        if (rows > 0x7fffffff) return cudaErrorInvalidConfiguration;
        const int threads = cols >= 8192 ? 512 : 256;
        if (vec) row_sum_block_kernel<true><<<(unsigned)rows, threads, 0, stream>>>(xp, op, rows, cols);
        else     row_sum_block_kernel<false><<<(unsigned)rows, threads, 0, stream>>>(xp, op, rows, cols);
    }
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="kb_mini_row_sum_cuda",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["row_sum_cuda"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.row_sum_cuda(x)
