"""RMSNorm over dim=1 (features) in one Triton pass: x / sqrt(mean(x^2, dim=1) + eps).

Idea: x is (B, C, S) with S = prod(spatial) contiguous. One program owns one batch element and a block
of BLOCK_S spatial positions for all C features: it loads the C x BLOCK_S tile once (C contiguous row
segments of BLOCK_S floats), reduces x^2 over the feature axis in registers, and writes x / rms.
Each element is read once and written once.

Why it beats eager: eager runs x**2 (read+write), mean over dim 1 (read), +eps, sqrt, and x / rms
(read+write): ~5 passes over the 7.5 GB tensor (112x64x512x512 fp32), ~37.5 GB of traffic.
Here: 7.5 GB read + 7.5 GB write = 15 GB -> ~5 ms at 3 TB/s vs ~12.5 ms; expected ~2.5x.
Offsets are int64 (the tensor has 1.88e9 elements).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_dim1_kernel(x_ptr, y_ptr, C, S, n_sblk, eps,
                         BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // n_sblk
    s = (pid % n_sblk) * BLOCK_S + tl.arange(0, BLOCK_S)
    c = tl.arange(0, BLOCK_C)
    offs = b.to(tl.int64) * C * S + c[:, None].to(tl.int64) * S + s[None, :]
    mask = (c < C)[:, None] & (s < S)[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / C
    rms = tl.sqrt(ms + eps)
    tl.store(y_ptr + offs, x / rms[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        if x.numel() == 0:
            return y
        B, C = x.shape[0], x.shape[1]
        S = x.numel() // (B * C)
        BLOCK_C = triton.next_power_of_2(C)
        # keep the register tile at ~8K floats (32 per thread with 8 warps)
        BLOCK_S = max(16, min(triton.next_power_of_2(S), 8192 // BLOCK_C))
        n_sblk = triton.cdiv(S, BLOCK_S)
        _rmsnorm_dim1_kernel[(B * n_sblk,)](x, y, C, S, n_sblk, float(self.eps),
                                            BLOCK_C=BLOCK_C, BLOCK_S=BLOCK_S, num_warps=8)
        return y
