"""MSE loss mean((p - t)^2) as a persistent Triton reduction plus a tiny finalize kernel.

Idea: a grid of ~4 programs per SM loops over 4096-float chunks (int64 offsets; 1.07e9 elements),
accumulating (p - t)^2 in a per-lane fp32 vector (each lane sums only ~500 values), reduces it with
a tree sum to one partial per program; a 1-program kernel sums the few hundred partials, scales by
1/n and writes the 0-dim result.

Why it beats eager: eager runs sub (read 2, write 1), pow (read 1, write 1) and mean (read 1) =
6 passes over 4.3 GB = ~25.8 GB (~8.6 ms at ~3 TB/s). We read p and t once: 8.6 GB, ~2.9 ms,
roughly 3x faster.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mse_partial_kernel(p_ptr, t_ptr, part_ptr, n,
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
        d = p - t
        acc += d * d
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
        _mse_partial_kernel[(grid,)](p, t, partials, n, grid, iters, BLOCK=BLOCK, num_warps=8)
        scale = 1.0 / n if n > 0 else float("nan")
        _finalize_kernel[(1,)](partials, out, grid, scale, BLOCK=1024, num_warps=4)
        return out
