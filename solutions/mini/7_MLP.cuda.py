"""CUDA solution: cuBLAS addmm per layer, ReLU applied in place by a float4 kernel (no extra activation buffers)."""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The kernels see a raw pointer and a stream; _relu_ checks the tensor. Neither file includes torch's C++ headers,
# most of a load_inline build's time (the .cu's parse by cudafe++, cicc and the host compiler).
_cpp = r"""
#include <pybind11/pybind11.h>
#include <cstdint>
int relu_(std::uintptr_t y, std::int64_t n, std::uintptr_t stream);
"""

_cuda = r"""
#include <cuda_runtime.h>
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

// y: contiguous float32, n elements, ReLU in place. Returns the launch's cudaError_t (0: success).
int relu_(std::uintptr_t y, std::int64_t n, std::uintptr_t stream_handle) {
    if (n == 0) return 0;
    cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
    float* yp = reinterpret_cast<float*>(y);
    int64_t done = 0;
    if ((y & 15) == 0 && n >= 4) {
        const int64_t n4 = n / 4;
        const int blocks = (int)(((n4 + 255) / 256) < 132 * 16 ? (n4 + 255) / 256 : 132 * 16);
        relu_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<float4*>(yp), n4);
        done = n4 * 4;
    }
    if (done < n) {
        relu_tail<<<(int)((n - done + 255) / 256), 256, 0, stream>>>(yp, done, n);
    }
    return (int)cudaGetLastError();
}
"""

# No implicit torch headers where this torch can leave them out (2.7 and later).
_LIGHT = {"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(load_inline).parameters else {}

_ext = load_inline(name="kb_mini_mlp_relu_cuda", cpp_sources=_cpp, cuda_sources=_cuda,
                   functions=["relu_"], with_pytorch_error_handling=False,
                   extra_cuda_cflags=["-O3"], verbose=False, **_LIGHT)


def _relu_(y):
    """ReLU in place on a float32 CUDA tensor (made contiguous first); returns the tensor written."""
    if y.dtype != torch.float32 or not y.is_cuda:
        raise TypeError("relu_: float32 CUDA tensor expected")
    y = y.contiguous()
    with torch.cuda.device(y.device):
        err = _ext.relu_(y.data_ptr(), y.numel(), torch.cuda.current_stream().cuda_stream)
    if err:
        raise RuntimeError(f"relu_: CUDA error {err}")
    return y


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.fc2 = nn.Linear(hidden_size, hidden_size)
        self.fc3 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        h = _relu_(torch.addmm(self.fc1.bias, x, self.fc1.weight.t()))
        h = _relu_(torch.addmm(self.fc2.bias, h, self.fc2.weight.t()))
        return torch.addmm(self.fc3.bias, h, self.fc3.weight.t())
