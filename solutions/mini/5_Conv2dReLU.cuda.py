"""CUDA solution: cuDNN convolution (bias included), then ReLU in place with a float4 kernel (no second buffer)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_cpp = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

cudaError_t relu_launch(float* y, int64_t n, cudaStream_t stream);

torch::Tensor relu_(torch::Tensor y) {
    TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == at::kFloat, "contiguous float32 CUDA tensor");
    const at::cuda::OptionalCUDAGuard guard(device_of(y));
    const int64_t n = y.numel();
    if (n == 0) return y;
    const cudaError_t err = relu_launch(y.data_ptr<float>(), n, at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "relu_: ", cudaGetErrorString(err));
    return y;
}
"""

_cuda = r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>

__global__ void relu_vec4(float4* __restrict__ y, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = y[i];
        y[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));
    }
}

__global__ void relu_tail(float* __restrict__ y, int64_t start, int64_t n) {
    int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(y[i], 0.f);
}

// Launches the kernels for this size on the caller's stream; the first launch error, if any
// (nothing further is launched after one).
cudaError_t relu_launch(float* y, int64_t n, cudaStream_t stream) {
    int64_t done = 0;
    if ((reinterpret_cast<uintptr_t>(y) & 15) == 0 && n >= 4) {
        const int64_t n4 = n / 4;
        const int blocks = (int)std::min<int64_t>((n4 + 255) / 256, 132 * 16);
        relu_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<float4*>(y), n4);
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
        done = n4 * 4;
    }
    if (done < n) {
        relu_tail<<<(int)((n - done + 255) / 256), 256, 0, stream>>>(y, done, n);
    }
    return cudaGetLastError();
}
"""

_ext = load_inline(name="kb_mini_conv2d_relu_cuda", cpp_sources=_cpp, cuda_sources=_cuda,
                   functions=["relu_"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        torch.backends.cudnn.benchmark = True

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias).contiguous()
        return _ext.relu_(y)
