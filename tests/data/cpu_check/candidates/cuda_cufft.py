# A CUDA candidate that includes a header of one of NVIDIA's libraries (cuFFT): a GPU machine's toolkit has it; a
# machine without it cannot check the candidate, which is not the candidate's fault (harness_error, not compile_error).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cufftXt.h>

__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

relu = load_inline("kb_test_relu_cufft", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);", cuda_sources=cuda_source,
                   functions=["relu_cuda"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return relu.relu_cuda(self.linear(x).contiguous())
