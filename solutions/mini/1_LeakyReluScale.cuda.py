"""CUDA solution: leaky-relu * scale fused into one vectorised (float4) elementwise kernel."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

cudaError_t leaky_relu_scale_launch(const float* xp, float* yp, int64_t n, float pos, float neg, int sms,
                                    cudaStream_t stream);

torch::Tensor leaky_relu_scale_cuda(torch::Tensor x, double negative_slope, double scale) {
    TORCH_CHECK(x.is_cuda(), "leaky_relu_scale_cuda: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "leaky_relu_scale_cuda: x must be float32");
    const at::cuda::OptionalCUDAGuard device_guard(device_of(x));
    auto xc = x.contiguous();
    TORCH_CHECK(xc.is_contiguous(), "leaky_relu_scale_cuda: x must be contiguous");
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;

    const float pos = (float)scale;
    const float neg = (float)(negative_slope * scale);
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const cudaError_t err = leaky_relu_scale_launch(xc.data_ptr<float>(), y.data_ptr<float>(), n, pos, neg, sms,
                                                    at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "leaky_relu_scale_cuda: ", cudaGetErrorString(err));
    return y;
}
"""

_cuda_source = r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>

__device__ __forceinline__ float leaky_scale(float v, float pos, float neg) {
    return v * (v > 0.0f ? pos : neg);
}

// Main body: 4 floats per thread per iteration, grid-stride loop.
__global__ void leaky_relu_scale_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y,
                                             int64_t n4, float pos, float neg) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = leaky_scale(v.x, pos, neg);
        v.y = leaky_scale(v.y, pos, neg);
        v.z = leaky_scale(v.z, pos, neg);
        v.w = leaky_scale(v.w, pos, neg);
        y[i] = v;
    }
}

// Scalar path: the tail after the float4 body, or everything when pointers are not 16-byte aligned.
__global__ void leaky_relu_scale_scalar_kernel(const float* __restrict__ x, float* __restrict__ y,
                                               int64_t start, int64_t n, float pos, float neg) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = leaky_scale(x[i], pos, neg);
    }
}

static int grid_for(int64_t work, int threads, int sms) {
    const int64_t blocks = (work + threads - 1) / threads;
    return (int)std::max<int64_t>(1, std::min<int64_t>(blocks, (int64_t)sms * 32));
}

// Launches the kernels for this size on the caller's stream (sms: the device's multiprocessor count);
// the first launch error, if any (nothing further is launched after one).
cudaError_t leaky_relu_scale_launch(const float* xp, float* yp, int64_t n, float pos, float neg, int sms,
                                    cudaStream_t stream) {
    const int threads = 256;

    const bool aligned = ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) & 15) == 0;
    int64_t done = 0;
    if (aligned) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            leaky_relu_scale_vec4_kernel<<<grid_for(n4, threads, sms), threads, 0, stream>>>(
                reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4, pos, neg);
            const cudaError_t err = cudaGetLastError();
            if (err != cudaSuccess) return err;
        }
        done = n4 * 4;
    }
    if (done < n) {
        leaky_relu_scale_scalar_kernel<<<grid_for(n - done, threads, sms), threads, 0, stream>>>(
            xp, yp, done, n, pos, neg);
    }
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="kb_mini_leaky_relu_scale_cuda",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["leaky_relu_scale_cuda"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope, scale):
        super().__init__()
        self.negative_slope = negative_slope
        self.scale = scale

    def forward(self, x):
        return _ext.leaky_relu_scale_cuda(x, float(self.negative_slope), float(self.scale))
