"""CUDA solution: one block per row, mean and variance by warp-shuffle block reductions, affine fused in the write."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

cudaError_t layer_norm_rows_launch(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols,
                                   float eps, cudaStream_t stream);

torch::Tensor layer_norm_rows(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "float32 CUDA input expected");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
    const int64_t cols = wc.numel();
    TORCH_CHECK(cols > 0 && xc.numel() % cols == 0, "weight must match the last dimension");
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.numel() / cols;
    if (rows == 0) return y;
    const cudaError_t err = layer_norm_rows_launch(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                                   y.data_ptr<float>(), rows, cols, (float)eps,
                                                   at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "layer_norm_rows: ", cudaGetErrorString(err));
    return y;
}
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

// Launches the kernel for this shape on the caller's stream; the launch's own error, if any.
cudaError_t layer_norm_rows_launch(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols,
                                   float eps, cudaStream_t stream) {
    const int threads = cols >= 1024 ? 1024 : (int)((cols + 31) / 32 * 32);
    layer_norm_kernel<<<(unsigned)rows, threads, 0, stream>>>(x, w, b, y, cols, eps);
    return cudaGetLastError();
}
"""

_ext = load_inline(name="kb_mini_layer_norm_cuda", cpp_sources=_cpp, cuda_sources=_cuda,
                   functions=["layer_norm_rows"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=eps)
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.5 * torch.randn(dim))
            self.ln.bias.copy_(0.5 * torch.randn(dim))

    def forward(self, x):
        return _ext.layer_norm_rows(x, self.ln.weight, self.ln.bias, float(self.ln.eps))
