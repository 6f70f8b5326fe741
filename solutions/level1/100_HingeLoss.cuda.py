"""Hinge loss mean(clamp(1 - p * t, min=0)) as a persistent Triton reduction + finalize kernel.

Semantics: predictions is (B, N) and targets is (B,) with B == N == 32768, so `predictions *
targets` broadcasts targets along the LAST dim: element [i, j] uses targets[j]. We expand both
operands to the broadcast shape, view them as (M, N) rows (the expanded targets keep a row stride of
0, so nothing is materialised) and loop over (row, 4096-column block) tiles: target blocks are tiny
(128 KB) and stay in L2. Each of ~4 programs per SM accumulates in a per-lane fp32 vector, tree-
reduces to a partial; a 1-program kernel sums the partials, scales by 1/numel, writes the 0-dim out.

Why it beats eager: eager runs mul (read 1, write 1), rsub (read 1, write 1), clamp (read 1,
write 1) and mean (read 1) = 7 passes over 4.3 GB = ~30 GB (~10 ms at ~3 TB/s). We read
predictions once: 4.3 GB, ~1.4 ms bandwidth-bound, roughly 6-7x faster.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _hinge_partial_kernel(p_ptr, t_ptr, part_ptr, N, ncb, ntiles, sp_row, sp_col, st_row, st_col,
                          nprog: tl.constexpr, iters: tl.constexpr, BLOCK: tl.constexpr):
    # Program pid handles tiles pid, pid + nprog, ... with iters = cdiv(ntiles, nprog); both are
    # host-computed constexprs (constexpr loop bounds also keep Triton's CPU interpreter happy).
    # A tile index >= ntiles is fully masked. Tile = (row, block of BLOCK columns).
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, iters):
        tile = pid + i * nprog
        row = (tile // ncb).to(tl.int64)
        cols = (tile % ncb) * BLOCK + tl.arange(0, BLOCK)
        mask = (cols < N) & (tile < ntiles)
        p = tl.load(p_ptr + row * sp_row + cols * sp_col, mask=mask, other=0.0,
                    eviction_policy="evict_first")
        t = tl.load(t_ptr + row * st_row + cols * st_col, mask=mask, other=0.0,
                    eviction_policy="evict_last")
        v = tl.maximum(1.0 - p * t, 0.0)
        acc += tl.where(mask, v, 0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _finalize_kernel(part_ptr, out_ptr, m: tl.constexpr, scale, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, m, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < m, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) * scale)


def _as_rows(x, shape, N):
    """Expand x to `shape` and view it as (-1, N); returns (tensor, row stride, col stride)."""
    x = x.expand(shape).reshape(-1, N)
    if x.stride(1) != 1 and x.stride(1) != 0:
        x = x.contiguous()
    return x, x.stride(0), x.stride(1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        shape = torch.broadcast_shapes(predictions.shape, targets.shape)
        N = shape[-1] if len(shape) > 0 else 1
        p, sp_row, sp_col = _as_rows(predictions, shape, N)
        t, st_row, st_col = _as_rows(targets, shape, N)
        M = p.shape[0]
        numel = M * N
        dev = p.device
        out = torch.empty((), dtype=torch.float32, device=dev)
        BLOCK = 4096 if N >= 4096 else max(16, triton.next_power_of_2(N))
        ncb = triton.cdiv(N, BLOCK)
        ntiles = M * ncb
        on_gpu = dev.type == "cuda"
        sms = torch.cuda.get_device_properties(dev).multi_processor_count if on_gpu else 4
        grid = max(1, min(ntiles, 4 * sms))
        iters = triton.cdiv(ntiles, grid)
        partials = torch.empty(grid, dtype=torch.float32, device=dev)
        _hinge_partial_kernel[(grid,)](p, t, partials, N, ncb, ntiles, sp_row, sp_col,
                                       st_row, st_col, nprog=grid, iters=iters, BLOCK=BLOCK,
                                       num_warps=8)
        scale = 1.0 / numel if numel > 0 else float("nan")
        _finalize_kernel[(1,)](partials, out, grid, scale, BLOCK=1024, num_warps=4)
        return out
