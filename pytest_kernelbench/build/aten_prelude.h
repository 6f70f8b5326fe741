// The ATen headers a kernel's host code uses, in place of torch/types.h (build/light.py's "aten" tier).
// torch/types.h is ATen/ATen.h (every operator), torch's autograd factories and its library API: most of what nvcc
// parses three times in a candidate's .cu. What kernels call (the PIKE corpus: torch::Tensor and its methods,
// TORCH_CHECK, torch::empty and empty_like, zeros, the dtype names, AT_DISPATCH, the CUDA stream and guard) is declared
// here with the same meaning; anything else fails to compile here and the .cu is compiled with torch/types.h instead.
// torch::empty here is at::empty: torch's factory differs only for options asking requires_grad, and a .cu that names
// requires_grad is never compiled with this header.
#pragma once
#include <optional>
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace torch {  // torch/types.h's own names
using namespace at;  // NOLINT
using std::nullopt;  // NOLINT
using std::optional;  // NOLINT
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kUInt16 = at::kUInt16;
constexpr auto kUInt32 = at::kUInt32;
constexpr auto kUInt64 = at::kUInt64;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kU8 = kUInt8;
constexpr auto kU16 = kUInt16;
constexpr auto kU32 = kUInt32;
constexpr auto kU64 = kUInt64;
constexpr auto kI8 = kInt8;
constexpr auto kI16 = kInt16;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
}  // namespace torch
