"""CPU solution: row softmax in a C++ extension with a vectorisable polynomial exp."""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = r"""
// pybind11 only, on raw pointers: torch's C++ headers (<torch/extension.h>, even <torch/python.h>) are most of a build's
// compile time (about 28 s here against 8); ModelNew checks and allocates the tensors.
#include <pybind11/pybind11.h>
#include <cstdint>
#include <cstring>
#include <cfloat>

// exp(x) for x <= 0 (Cephes-style range reduction + degree-6 polynomial, ~1e-7 relative error).
// Written without library calls so that gcc -O3 vectorises the loops that use it.
static inline float exp_nonpos(float x) {
    x = x > -87.0f ? x : -87.0f;   // also keeps the 2^n scale below in the normal range
    const float t = x * 1.44269504088896341f;
    const float n = (t + 12582912.0f) - 12582912.0f;   // round to nearest integer
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float s;
    std::memcpy(&s, &bits, sizeof(s));
    return y * s;
}

static inline __attribute__((always_inline)) void softmax_row_body(const float* __restrict x, float* __restrict y, int64_t n) {
    float mx[16];
    for (int k = 0; k < 16; ++k) mx[k] = -FLT_MAX;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        for (int k = 0; k < 16; ++k) mx[k] = x[j + k] > mx[k] ? x[j + k] : mx[k];
    }
    float m = -FLT_MAX;
    for (int k = 0; k < 16; ++k) m = mx[k] > m ? mx[k] : m;
    for (; j < n; ++j) m = x[j] > m ? x[j] : m;

    for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpos(x[i] - m);

    float acc[16] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f,
                     0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    j = 0;
    for (; j + 16 <= n; j += 16) {
        for (int k = 0; k < 16; ++k) acc[k] += y[j + k];
    }
    float s = 0.f;
    for (int k = 0; k < 16; ++k) s += acc[k];
    for (; j < n; ++j) s += y[j];

    const float inv = 1.0f / s;
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

static void softmax_row_generic(const float* __restrict x, float* __restrict y, int64_t n) {
    softmax_row_body(x, y, n);
}

// On x86-64 the same body is also compiled for AVX2+FMA (8-wide instead of SSE2's 4-wide);
// it is chosen at run time when the CPU supports it.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KB_SOFTMAX_AVX2 1
__attribute__((target("avx2,fma")))
static void softmax_row_avx2(const float* __restrict x, float* __restrict y, int64_t n) {
    softmax_row_body(x, y, n);
}
#endif

using softmax_row_fn = void (*)(const float* __restrict, float* __restrict, int64_t);

static softmax_row_fn pick_softmax_row() {
#ifdef KB_SOFTMAX_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return softmax_row_avx2;
#endif
    return softmax_row_generic;
}

void softmax_lastdim(std::uintptr_t x_ptr, std::uintptr_t out_ptr, std::int64_t rows, std::int64_t cols) {
    const float* src = reinterpret_cast<const float*>(x_ptr);
    float* dst = reinterpret_cast<float*>(out_ptr);
    static const softmax_row_fn row_fn = pick_softmax_row();
    #pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) row_fn(src + r * cols, dst + r * cols, cols);
}
"""

# No implicit #include <torch/extension.h> where this torch can leave it out (2.7 and later).
_LIGHT = {"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(load_inline).parameters else {}

_ext = load_inline(
    name="kb_mini_softmax_cpu",
    cpp_sources=_cpp_source,
    functions=["softmax_lastdim"],
    with_pytorch_error_handling=False,  # plain pybind11 bindings (torch's wrapper needs its headers)
    # -fno-trapping-math / -ffinite-math-only / -fno-signed-zeros let gcc turn the
    # compare-selects (max, clamp) into SIMD max instructions, so all row loops vectorise.
    extra_cflags=["-O3", "-fopenmp", "-fno-trapping-math", "-ffinite-math-only", "-fno-signed-zeros"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
    **_LIGHT,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.dtype != torch.float32 or x.device.type != "cpu" or x.dim() < 1:
            raise TypeError("softmax_lastdim: expected a float32 CPU tensor of at least 1 dimension")
        x = x.contiguous()
        out = torch.empty_like(x)
        if x.numel():
            _ext.softmax_lastdim(x.data_ptr(), out.data_ptr(), x.numel() // x.shape[-1], x.shape[-1])
        return out
