"""CUDA solution: cuBLAS GEMM with the linear bias (addmm), then the second bias and exact GELU fused in place."""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The kernel sees raw pointers and a stream; ModelNew checks the tensors. Neither file includes torch's C++ headers,
# most of a load_inline build's time (the .cu's parse by cudafe++, cicc and the host compiler).
_cpp = r"""
#include <pybind11/pybind11.h>
#include <cstdint>
int bias_gelu_(std::uintptr_t y, std::uintptr_t bias, std::int64_t n, std::int64_t cols, std::uintptr_t stream);
"""

_cuda = r"""
#include <cuda_runtime.h>
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

// Returns the launch's cudaError_t (0: success); cols above 0 and dividing n.
int bias_gelu_(std::uintptr_t y, std::uintptr_t bias, std::int64_t n, std::int64_t cols, std::uintptr_t stream_handle) {
    cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
    if (cols % 4 == 0) {
        const int64_t n4 = n / 4;
        const int blocks = (int)(((n4 + 255) / 256) < 132 * 16 ? (n4 + 255) / 256 : 132 * 16);
        bias_gelu_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<float4*>(y), reinterpret_cast<const float4*>(bias),
                                                    n4, cols / 4);
    } else {
        const int blocks = (int)(((n + 255) / 256) < 132 * 16 ? (n + 255) / 256 : 132 * 16);
        bias_gelu_scalar<<<blocks, 256, 0, stream>>>(reinterpret_cast<float*>(y), reinterpret_cast<const float*>(bias), n, cols);
    }
    return (int)cudaGetLastError();
}
"""

# No implicit torch headers where this torch can leave them out (2.7 and later).
_LIGHT = {"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(load_inline).parameters else {}

_ext = load_inline(name="kb_mini_gemm_bias_gelu_cuda", cpp_sources=_cpp, cuda_sources=_cuda, functions=["bias_gelu_"],
                   with_pytorch_error_handling=False, extra_cuda_cflags=["-O3"], verbose=False, **_LIGHT)


def _bias_gelu_(y, bias):
    """gelu(y + bias) in place on a contiguous float32 CUDA ``y`` whose last dimension is ``bias``'s length."""
    if not (y.is_cuda and bias.is_cuda and y.is_contiguous() and bias.is_contiguous()):
        raise TypeError("bias_gelu_: contiguous CUDA tensors expected")
    if y.dtype != torch.float32 or bias.dtype != torch.float32:
        raise TypeError("bias_gelu_: float32 expected")
    n, cols = y.numel(), bias.numel()
    if cols == 0 or n % cols != 0:
        raise ValueError("bias_gelu_: bias must match the last dimension")
    with torch.cuda.device(y.device):
        err = _ext.bias_gelu_(y.data_ptr(), bias.data_ptr(), n, cols, torch.cuda.current_stream().cuda_stream)
    if err:
        raise RuntimeError(f"bias_gelu_: CUDA error {err}")
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        y = torch.addmm(self.linear.bias, x.reshape(-1, x.shape[-1]), self.linear.weight.t())
        return _bias_gelu_(y, self.bias.contiguous()).view(*x.shape[:-1], -1)
