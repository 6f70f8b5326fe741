"""CPU solution: row-wise sum with 16 independent (vectorisable) accumulators in a C++ extension."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <vector>

torch::Tensor row_sum(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "row_sum: expected a CPU tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "row_sum: expected float32");
    TORCH_CHECK(x.dim() >= 1, "row_sum: expected at least 1 dimension");
    auto xc = x.contiguous();
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    std::vector<int64_t> out_sizes(xc.sizes().begin(), xc.sizes().end() - 1);
    auto out = torch::zeros(out_sizes, xc.options());
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

_ext = load_inline(
    name="kb_mini_row_sum_cpu",
    cpp_sources=_cpp_source,
    functions=["row_sum"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.row_sum(x)
