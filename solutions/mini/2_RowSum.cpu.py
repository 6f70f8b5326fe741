"""CPU solution: row-wise sum with 16 independent (vectorisable) accumulators in a C++ extension."""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = r"""
// Only the headers the code uses: <torch/extension.h> (all of torch's C++ API) takes half as long again to compile.
#include <torch/python.h>
#include <ATen/ops/zeros.h>
#include <ATen/Parallel.h>
#include <vector>

at::Tensor row_sum(at::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "row_sum: expected a CPU tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "row_sum: expected float32");
    TORCH_CHECK(x.dim() >= 1, "row_sum: expected at least 1 dimension");
    auto xc = x.contiguous();
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    std::vector<int64_t> out_sizes(xc.sizes().begin(), xc.sizes().end() - 1);
    auto out = at::zeros(out_sizes, xc.options());
    if (cols == 0) return out;
    const float* src = xc.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t grain = std::max<int64_t>(1, (1 << 16) / cols);
    at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* row = src + r * cols;
            float acc[16] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f,
                             0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            int64_t j = 0;
            for (; j + 16 <= cols; j += 16) {
                for (int k = 0; k < 16; ++k) acc[k] += row[j + k];
            }
            float s = 0.f;
            for (int k = 0; k < 16; ++k) s += acc[k];
            for (; j < cols; ++j) s += row[j];
            dst[r] = s;
        }
    });
    return out;
}
"""

# No implicit #include <torch/extension.h> where this torch can leave it out (2.7 and later).
_LIGHT = {"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(load_inline).parameters else {}

_ext = load_inline(
    name="kb_mini_row_sum_cpu",
    cpp_sources=_cpp_source,
    functions=["row_sum"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
    **_LIGHT,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.row_sum(x)
