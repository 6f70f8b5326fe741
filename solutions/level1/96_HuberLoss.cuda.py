"""Smooth L1 (Huber, beta=1.0, mean) loss as a persistent Triton reduction plus a finalize kernel.

Idea: element loss is 0.5*d^2 if |d| < 1 else |d| - 0.5 (d = p - t; F.smooth_l1_loss default
beta=1.0, reduction='mean'). A grid of ~4 programs per SM loops over 4096-float chunks (int64
offsets; 1.07e9 elements) accumulating into a per-lane fp32 vector, tree-reduces to one partial per
program; a 1-program kernel sums the partials, scales by 1/n and writes the 0-dim result.

Why it beats eager: eager runs the elementwise smooth_l1 kernel (read 2, write 1) and then mean
(read 1) = 4 passes over 4.3 GB = ~17 GB (~5.7 ms at ~3 TB/s). We read p and t once: 8.6 GB,
~2.9 ms, roughly 2x faster.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _huber_partial_kernel(p_ptr, t_ptr, part_ptr, n, beta,
                          nprog: tl.constexpr, iters: tl.constexpr, BLOCK: tl.constexpr):
    # Program pid handles chunks pid, pid + nprog, ...; iters = cdiv(nchunks, nprog). Both are
    # host-computed constexprs (fixed per shape; constexpr loop bounds also keep Triton's CPU
    # interpreter happy). A surplus last chunk of some programs is fully masked.
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, iters):
        c = (pid + i * nprog).to(tl.int64)
        offs = c * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        p = tl.load(p_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        t = tl.load(t_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        d = tl.abs(p - t)
        acc += tl.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _finalize_kernel(part_ptr, out_ptr, m: tl.constexpr, scale, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, m, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < m, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) * scale)


def _num_programs(device, nchunks):
    on_gpu = device.type == "cuda"
    sms = torch.cuda.get_device_properties(device).multi_processor_count if on_gpu else 4
    return max(1, min(nchunks, 4 * sms))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        if predictions.shape != targets.shape:
            predictions, targets = torch.broadcast_tensors(predictions, targets)
        p = predictions.contiguous()
        t = targets.contiguous()
        n = p.numel()
        out = torch.empty((), dtype=torch.float32, device=p.device)
        BLOCK = 4096
        nchunks = triton.cdiv(max(n, 1), BLOCK)
        grid = _num_programs(p.device, nchunks)
        iters = triton.cdiv(nchunks, grid)
        partials = torch.empty(grid, dtype=torch.float32, device=p.device)
        _huber_partial_kernel[(grid,)](p, t, partials, n, 1.0, grid, iters,
                                       BLOCK=BLOCK, num_warps=8)
        scale = 1.0 / n if n > 0 else float("nan")
        _finalize_kernel[(1,)](partials, out, grid, scale, BLOCK=1024, num_warps=4)
        return out
