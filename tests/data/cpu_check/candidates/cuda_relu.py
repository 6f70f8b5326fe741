# A CUDA load_inline candidate for tests/data/tiny/level9/1_TinyLinear.py: the linear layer in PyTorch, ReLU in a kernel.
# Light ATen headers (as kbagent's prompt asks) and no implicit torch/types.h: half the nvcc time (docs/performance.md).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>

__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

at::Tensor relu_cuda(at::Tensor x) {
    auto y = at::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

cpp_source = "#include <torch/extension.h>\ntorch::Tensor relu_cuda(torch::Tensor x);"
relu = load_inline("kb_test_relu", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["relu_cuda"], no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return relu.relu_cuda(self.linear(x).contiguous())
