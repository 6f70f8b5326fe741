"""Frobenius-norm normalisation x / ||x||_F with two persistent Triton kernels.

Idea: (1) a persistent grid (4 programs per SM) sweeps the flat tensor, each program accumulating x^2
in a BLOCK-wide fp32 register vector and writing one partial sum; (2) a second persistent grid: each
program sums the (few hundred) partials in a fixed order, takes sqrt, and scales its share of the tensor.
No atomics, deterministic. Pass (2) walks the blocks from the end of the tensor backwards, so its first
reads hit what pass (1) left in L2.

Why it should beat eager: the traffic is the same 3 passes as eager's (vector_norm reduction: read
7.5 GB; `x / norm`: read + write) = 22.5 GB, ~7.5 ms at 3 TB/s -- this op cannot do better, every
element must be read before the first output is known. The gain comes only from eager's division by a
0-dim CUDA tensor, which is a broadcast operand and sends TensorIterator down its non-vectorised
path; here both passes use 16-byte loads/stores. Expected ~1.0-1.15x.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sumsq_partials_kernel(x_ptr, part_ptr, n, n_blocks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    ar = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for blk in range(pid, n_blocks, nprog):
        offs = tl.cast(blk, tl.int64) * BLOCK + ar
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        acc += x * x
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _scale_kernel(x_ptr, y_ptr, part_ptr, n, n_blocks, n_parts,
                  BLOCK: tl.constexpr, PARTS: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    p = tl.arange(0, PARTS)
    norm = tl.sqrt(tl.sum(tl.load(part_ptr + p, mask=p < n_parts, other=0.0), axis=0))
    ar = tl.arange(0, BLOCK)
    for i in range(pid, n_blocks, nprog):
        blk = n_blocks - 1 - i  # newest data (still in L2 after pass 1) first
        offs = tl.cast(blk, tl.int64) * BLOCK + ar
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + offs, x / norm, mask=mask)


def _num_sms(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return y
        BLOCK = 4096
        n_blocks = triton.cdiv(n, BLOCK)
        n_parts = min(n_blocks, 4 * _num_sms(x.device))
        parts = torch.empty(n_parts, device=x.device, dtype=torch.float32)
        _sumsq_partials_kernel[(n_parts,)](x, parts, n, n_blocks, BLOCK=BLOCK, num_warps=8)
        n_prog2 = min(n_blocks, 4 * _num_sms(x.device))
        _scale_kernel[(n_prog2,)](x, y, parts, n, n_blocks, n_parts, BLOCK=BLOCK,
                                  PARTS=triton.next_power_of_2(n_parts), num_warps=8)
        return y
