"""CPU solution: row-wise sum with 16 independent (vectorisable) accumulators in a C++ extension."""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = r"""
// pybind11 only, on raw pointers: torch's C++ headers (<torch/extension.h>, even <torch/python.h>) are most of a build's
// compile time (about 28 s here against 8); ModelNew checks and allocates the tensors.
#include <pybind11/pybind11.h>
#include <cstdint>

void row_sum(std::uintptr_t x_ptr, std::uintptr_t out_ptr, std::int64_t rows, std::int64_t cols) {
    const float* src = reinterpret_cast<const float*>(x_ptr);
    float* dst = reinterpret_cast<float*>(out_ptr);
    #pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* row = src + r * cols;
        float acc[16] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f,
                         0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        std::int64_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            for (int k = 0; k < 16; ++k) acc[k] += row[j + k];
        }
        float s = 0.f;
        for (int k = 0; k < 16; ++k) s += acc[k];
        for (; j < cols; ++j) s += row[j];
        dst[r] = s;
    }
}
"""

# No implicit #include <torch/extension.h> where this torch can leave it out (2.7 and later).
_LIGHT = {"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(load_inline).parameters else {}

_ext = load_inline(
    name="kb_mini_row_sum_cpu",
    cpp_sources=_cpp_source,
    functions=["row_sum"],
    with_pytorch_error_handling=False,  # plain pybind11 bindings (torch's wrapper needs its headers)
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
    **_LIGHT,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.dtype != torch.float32 or x.device.type != "cpu" or x.dim() < 1:
            raise TypeError("row_sum: expected a float32 CPU tensor of at least 1 dimension")
        x = x.contiguous()
        out = torch.empty(x.shape[:-1], dtype=x.dtype)
        if x.shape[-1] == 0:
            return out.zero_()
        _ext.row_sum(x.data_ptr(), out.data_ptr(), out.numel(), x.shape[-1])
        return out
