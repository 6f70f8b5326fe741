"""relu as a Triton kernel (BackendBench layout)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def relu_kernel_impl(x):
    xc = x.contiguous()
    y = torch.empty_like(xc)
    n = xc.numel()
    if n:
        _relu[(triton.cdiv(n, 4096),)](xc, y, n, BLOCK=4096)
    return y
