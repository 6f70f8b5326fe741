"""GroupNorm (8 groups of 8 channels, affine) as three Triton kernels: chunk stats, finalize, apply.

Idea: each (n, c) plane of HW = 262144 floats is cut into CHUNK-sized pieces. Kernel 1 loads one chunk
into registers and writes its mean and M2 = sum((x - chunk_mean)^2) (two-pass inside registers, so no
cancellation). Kernel 2 (one program per (n, group)) merges the group's C/G * HW/CHUNK chunk statistics
with Chan's formula into mean and rstd = 1/sqrt(var_biased + eps). Kernel 3 streams the data once more
and writes (x - mean) * rstd * weight[c] + bias[c]; each program lies inside one channel, so weight and
bias are two scalar loads. It runs the chunks in reverse order, so its first reads hit what kernel 1
left in L2.

Why it should beat eager: GroupNorm must read x twice (statistics, then normalise) and write once:
3 x 7.5 GB = 22.5 GB -> ~7.5 ms at 3 TB/s, the same pass count as eager (native_group_norm: a moments
kernel with one block per (n, group) = 896 blocks of 8 MiB each, a fused-params kernel, an elementwise
apply). The gain is only eager's efficiency loss (its 896 long-running blocks leave a tail of idle
SMs); here ~230k programs each stream one contiguous 32 KiB chunk. Expected ~1.0-1.3x.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _chunk_stats_kernel(x_ptr, cmean_ptr, cm2_ptr, HW, n_chunks, CHUNK: tl.constexpr):
    pid = tl.program_id(0)  # plane * n_chunks + chunk
    plane = pid // n_chunks
    j = pid % n_chunks
    offs = j * CHUNK + tl.arange(0, CHUNK)
    mask = offs < HW
    x = tl.load(x_ptr + plane.to(tl.int64) * HW + offs, mask=mask, other=0.0)
    cnt = tl.minimum(HW - j * CHUNK, CHUNK).to(tl.float32)
    mean = tl.sum(x, axis=0) / cnt
    d = tl.where(mask, x - mean, 0.0)
    tl.store(cmean_ptr + pid, mean)
    tl.store(cm2_ptr + pid, tl.sum(d * d, axis=0))


@triton.jit
def _finalize_kernel(cmean_ptr, cm2_ptr, stat_ptr, HW, n_chunks, n_part, eps,
                     CHUNK: tl.constexpr, PART: tl.constexpr):
    g = tl.program_id(0)  # one normalisation group: (n, c) for InstanceNorm, (n, g) for GroupNorm
    i = tl.arange(0, PART)
    mask = i < n_part
    cm = tl.load(cmean_ptr + g * n_part + i, mask=mask, other=0.0)
    m2 = tl.load(cm2_ptr + g * n_part + i, mask=mask, other=0.0)
    cnt = tl.where(mask, tl.minimum(HW - (i % n_chunks) * CHUNK, CHUNK), 0).to(tl.float32)
    total = tl.sum(cnt, axis=0)
    mean = tl.sum(cnt * cm, axis=0) / total
    dm = cm - mean
    var = (tl.sum(m2, axis=0) + tl.sum(cnt * dm * dm, axis=0)) / total
    tl.store(stat_ptr + 2 * g, mean)
    tl.store(stat_ptr + 2 * g + 1, 1.0 / tl.sqrt(var + eps))


@triton.jit
def _apply_kernel(x_ptr, y_ptr, stat_ptr, w_ptr, b_ptr, C, planes_per_group, HW, n_chunks, n_prog,
                  HAS_AFFINE: tl.constexpr, CHUNK: tl.constexpr):
    pid = n_prog - 1 - tl.program_id(0)  # reverse order: newest stats-pass data first
    plane = pid // n_chunks
    j = pid % n_chunks
    g = plane // planes_per_group
    mean = tl.load(stat_ptr + 2 * g)
    rstd = tl.load(stat_ptr + 2 * g + 1)
    offs = j * CHUNK + tl.arange(0, CHUNK)
    mask = offs < HW
    ptr_offs = plane.to(tl.int64) * HW + offs
    x = tl.load(x_ptr + ptr_offs, mask=mask, other=0.0)
    y = (x - mean) * rstd
    if HAS_AFFINE:
        c = plane % C
        y = y * tl.load(w_ptr + c) + tl.load(b_ptr + c)
    tl.store(y_ptr + ptr_offs, y, mask=mask)


def _group_norm(x, groups, weight, bias, eps):
    """Normalise each of N*groups contiguous groups of x (N, C, *); optional per-channel affine."""
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    N, C = x.shape[0], x.shape[1]
    HW = x.numel() // (N * C)
    cpg = C // groups
    CHUNK = min(8192, triton.next_power_of_2(HW))
    n_chunks = triton.cdiv(HW, CHUNK)
    n_stat = N * C * n_chunks
    cmean = torch.empty(n_stat, device=x.device, dtype=torch.float32)
    cm2 = torch.empty_like(cmean)
    stats = torch.empty(2 * N * groups, device=x.device, dtype=torch.float32)
    _chunk_stats_kernel[(n_stat,)](x, cmean, cm2, HW, n_chunks, CHUNK=CHUNK, num_warps=8)
    n_part = cpg * n_chunks
    _finalize_kernel[(N * groups,)](cmean, cm2, stats, HW, n_chunks, n_part, float(eps),
                                    CHUNK=CHUNK, PART=triton.next_power_of_2(n_part), num_warps=4)
    has_affine = weight is not None
    w = weight if has_affine else stats
    b = bias if has_affine else stats
    _apply_kernel[(n_stat,)](x, y, stats, w, b, C, cpg, HW, n_chunks, n_stat,
                             HAS_AFFINE=has_affine, CHUNK=CHUNK, num_warps=8)
    return y



class ModelNew(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _group_norm(x, self.gn.num_groups, self.gn.weight, self.gn.bias, self.gn.eps)
