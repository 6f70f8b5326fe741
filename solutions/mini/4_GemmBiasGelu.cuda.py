"""CUDA solution: cuBLAS GEMM with the linear bias (addmm), then the second bias and exact GELU fused in place."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

cudaError_t bias_gelu_launch(float* y, const float* bias, int64_t n, int64_t cols, cudaStream_t stream);

torch::Tensor bias_gelu_(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_cuda() && bias.is_cuda() && y.is_contiguous() && bias.is_contiguous(), "contiguous CUDA tensors");
    TORCH_CHECK(y.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat, "float32 expected");
    const at::cuda::OptionalCUDAGuard guard(device_of(y));
    const int64_t n = y.numel(), cols = bias.numel();
    TORCH_CHECK(cols > 0 && n % cols == 0, "bias must match the last dimension");
    const cudaError_t err = bias_gelu_launch(y.data_ptr<float>(), bias.data_ptr<float>(), n, cols,
                                             at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "bias_gelu_: ", cudaGetErrorString(err));
    return y;
}
"""

_cuda = r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>

// y[r, c] = gelu(y[r, c] + bias[c]), exact (erf) GELU as F.gelu's default; cols % 4 == 0 uses float4.
__global__ void bias_gelu_vec4(float4* __restrict__ y, const float4* __restrict__ bias, int64_t n4, int64_t cols4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = y[i], b = bias[i % cols4];
        float t[4] = {v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w};
        #pragma unroll
        for (int k = 0; k < 4; ++k) t[k] = 0.5f * t[k] * (1.0f + erff(t[k] * 0.70710678118654752f));
        y[i] = make_float4(t[0], t[1], t[2], t[3]);
    }
}

__global__ void bias_gelu_scalar(float* __restrict__ y, const float* __restrict__ bias, int64_t n, int64_t cols) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float t = y[i] + bias[i % cols];
        y[i] = 0.5f * t * (1.0f + erff(t * 0.70710678118654752f));
    }
}

// Launches the kernel for this size on the caller's stream (cols > 0, n % cols == 0); the launch's own error, if any.
cudaError_t bias_gelu_launch(float* y, const float* bias, int64_t n, int64_t cols, cudaStream_t stream) {
    if (cols % 4 == 0) {
        const int64_t n4 = n / 4;
        const int blocks = (int)std::min<int64_t>((n4 + 255) / 256, 132 * 16);
        bias_gelu_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<float4*>(y),
            reinterpret_cast<const float4*>(bias), n4, cols / 4);
    } else {
        const int blocks = (int)std::min<int64_t>((n + 255) / 256, 132 * 16);
        bias_gelu_scalar<<<blocks, 256, 0, stream>>>(y, bias, n, cols);
    }
    return cudaGetLastError();
}
"""

_ext = load_inline(name="kb_mini_gemm_bias_gelu_cuda", cpp_sources=_cpp, cuda_sources=_cuda,
                   functions=["bias_gelu_"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        y = torch.addmm(self.linear.bias, x.reshape(-1, x.shape[-1]), self.linear.weight.t())
        return _ext.bias_gelu_(y, self.bias.contiguous()).view(*x.shape[:-1], -1)
