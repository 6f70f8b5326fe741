# problem: 3/45
"""U-Net with softmax activations: Softmax(dim=-1) in CUDA, one warp per row of W.

Every DoubleConv does conv -> BN -> softmax over the width, twice. The convs, batch norms, max-pools and transposed
convs stay in PyTorch (cuDNN); the softmax is one CUDA kernel (one warp per row, held in registers: max, sum of
exp, write).

Why BN is not fused into the softmax any more: at its real size this network is numerically chaotic. From the
third encoder on, its BN outputs reach 20-80 before the softmax (rows close to one-hot), and a rounding difference
of ~1e-6 after the first BN grows 2-3x per layer over the 18 BN + softmax layers: the reference in fp64 against
itself in fp32, on an H100, differs in 5429 of 1M outputs by more than the 1e-2 tolerance (max 0.73). A fused BN
with its own statistics (double sums, x * scale + shift, __expf, * (1 / sum)) was accurate, but not bit-equal to
cuDNN's batch norm and ATen's softmax, and failed on ~0.5% of the outputs (max 0.6-0.76) in the same way. So BN is
PyTorch's own (bit-equal, running stats updated as in the reference), and the softmax kernel does ATen's
softmax_warp_forward arithmetic for W <= 1024, in its order: per-lane sums over j = lane, lane + 32, ..., an xor
butterfly 16 ... 1, expf (not __expf) and e / sum (not e * (1 / sum)). Its output is bit-equal to the reference's.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor softmax_lastdim(torch::Tensor x);
"""

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__device__ __forceinline__ float warp_max_f(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
__device__ __forceinline__ float warp_sum_f(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// one warp per row of W <= 32 * ITER elements, held in registers: y = softmax(x) along W, in the order of ATen's
// softmax_warp_forward (padding -inf, whose exp adds 0 to the sums)
template <int ITER>
__global__ void softmax_lastdim_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int W) {
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + row * W;
    float* yr = y + row * W;
    float v[ITER];
    float m = -INFINITY;
#pragma unroll
    for (int it = 0; it < ITER; ++it) {
        const int j = lane + it * 32;
        v[it] = j < W ? xr[j] : -INFINITY;
        m = fmaxf(m, v[it]);
    }
    m = warp_max_f(m);
    float s = 0.f;
#pragma unroll
    for (int it = 0; it < ITER; ++it) {
        v[it] = expf(v[it] - m);
        s += v[it];
    }
    s = warp_sum_f(s);
#pragma unroll
    for (int it = 0; it < ITER; ++it) {
        const int j = lane + it * 32;
        if (j < W) yr[j] = v[it] / s;
    }
}

template <int ITER>
void launch_softmax(const torch::Tensor& x, torch::Tensor& y, int64_t rows, int W) {
    const int warps_per_block = 8;
    const unsigned blocks = (unsigned)((rows + warps_per_block - 1) / warps_per_block);
    softmax_lastdim_kernel<ITER><<<blocks, warps_per_block * 32, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), rows, W);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor softmax_lastdim(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == at::kFloat && x.dim() >= 1,
                "x: contiguous float32 CUDA");
    const int W = x.size(-1);
    TORCH_CHECK(W <= 1024, "softmax_lastdim: rows of at most 1024 (ATen's warp softmax), got ", W);
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto y = torch::empty_like(x);
    const int64_t rows = W > 0 ? x.numel() / W : 0;
    if (rows == 0) return y;
    const int iters = (W + 31) / 32;  // ITER: its next power of two, as ATen's WARP_ITERATIONS
    if (iters <= 1) launch_softmax<1>(x, y, rows, W);
    else if (iters <= 2) launch_softmax<2>(x, y, rows, W);
    else if (iters <= 4) launch_softmax<4>(x, y, rows, W);
    else if (iters <= 8) launch_softmax<8>(x, y, rows, W);
    else if (iters <= 16) launch_softmax<16>(x, y, rows, W);
    else launch_softmax<32>(x, y, rows, W);
    return y;
}
"""

unet_ext = load_inline(
    name="unet_softmax_lastdim",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_lastdim"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.Softmax(dim=-1),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.Softmax(dim=-1),
        )

    def _bn_softmax(self, x, bn):
        return unet_ext.softmax_lastdim(bn(x).contiguous())

    def forward(self, x):
        c1, bn1, _, c2, bn2, _ = self.double_conv
        x = self._bn_softmax(c1(x), bn1)
        return self._bn_softmax(c2(x), bn2)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, features):
        super().__init__()
        self.encoder1 = DoubleConv(in_channels, features)
        self.pool1 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.encoder2 = DoubleConv(features, features * 2)
        self.pool2 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.encoder3 = DoubleConv(features * 2, features * 4)
        self.pool3 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.encoder4 = DoubleConv(features * 4, features * 8)
        self.pool4 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.bottleneck = DoubleConv(features * 8, features * 16)
        self.upconv4 = nn.ConvTranspose2d(features * 16, features * 8, kernel_size=2, stride=2)
        self.decoder4 = DoubleConv(features * 16, features * 8)
        self.upconv3 = nn.ConvTranspose2d(features * 8, features * 4, kernel_size=2, stride=2)
        self.decoder3 = DoubleConv(features * 8, features * 4)
        self.upconv2 = nn.ConvTranspose2d(features * 4, features * 2, kernel_size=2, stride=2)
        self.decoder2 = DoubleConv(features * 4, features * 2)
        self.upconv1 = nn.ConvTranspose2d(features * 2, features, kernel_size=2, stride=2)
        self.decoder1 = DoubleConv(features * 2, features)
        self.final_conv = nn.Conv2d(features, out_channels, kernel_size=1)

    def forward(self, x):
        enc1 = self.encoder1(x)
        enc2 = self.encoder2(self.pool1(enc1))
        enc3 = self.encoder3(self.pool2(enc2))
        enc4 = self.encoder4(self.pool3(enc3))
        bottleneck = self.bottleneck(self.pool4(enc4))
        dec4 = self.decoder4(torch.cat((self.upconv4(bottleneck), enc4), dim=1))
        dec3 = self.decoder3(torch.cat((self.upconv3(dec4), enc3), dim=1))
        dec2 = self.decoder2(torch.cat((self.upconv2(dec3), enc2), dim=1))
        dec1 = self.decoder1(torch.cat((self.upconv1(dec2), enc1), dim=1))
        return self.final_conv(dec1)
