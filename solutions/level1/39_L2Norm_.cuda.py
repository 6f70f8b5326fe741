"""Row-wise L2 normalisation x / ||x||_2 (dim=1) with one persistent Triton kernel.

Idea: x is (R, D) = (32768, 65535). A persistent grid (one program per SM) walks the rows; for each
row it (1) sums x^2 over the row in BLOCK-wide chunks, then (2) re-reads the row and writes
x / sqrt(sum). The row is 256 KiB and only ~132 rows are in flight, so pass (2) finds much of its row
still in L2: pass (1) loads are marked evict_last, pass (2) loads/stores evict_first, and pass (2)
walks the row backwards (the most recently loaded chunk first).

Why it beats eager: eager runs the norm reduction (read 8.6 GB) and the broadcast division
(read+write): 25.8 GB, ~8.6 ms at 3 TB/s. Here: read + write = 17.2 GB when pass (2) hits L2, up to
25.8 GB if it never does -> ~6-8.6 ms, expected ~1.1-1.5x.
Row starts are only 4-byte aligned (D is odd), so loads are scalar but fully coalesced.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _l2_rows_kernel(x_ptr, y_ptr, R, D, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    ar = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(D, BLOCK)
    for row in range(pid, R, nprog):
        base = tl.cast(row, tl.int64) * D
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, D, BLOCK):
            cols = start + ar
            x = tl.load(x_ptr + base + cols, mask=cols < D, other=0.0, eviction_policy="evict_last")
            acc += x * x
        norm = tl.sqrt(tl.sum(acc, axis=0))
        for j in range(0, n_chunks):
            cols = (n_chunks - 1 - j) * BLOCK + ar
            mask = cols < D
            x = tl.load(x_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first")
            tl.store(y_ptr + base + cols, x / norm, mask=mask, eviction_policy="evict_first")


def _num_sms(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2:  # normalise over dim 1 of any shape: move it last
            xt = x.movedim(1, -1)
            return self.forward(xt.reshape(-1, xt.shape[-1])).reshape(xt.shape).movedim(-1, 1)
        x = x.contiguous()
        y = torch.empty_like(x)
        R, D = x.shape
        if x.numel() == 0:
            return y
        grid = (min(R, _num_sms(x.device)),)
        _l2_rows_kernel[grid](x, y, R, D, BLOCK=16384, num_warps=32)
        return y
