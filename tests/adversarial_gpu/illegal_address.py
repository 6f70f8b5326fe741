# judge: runtime_error
# says: illegal memory access
"""A Triton kernel that writes far out of bounds: a CUDA illegal memory access that poisons the context."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bad_store(out_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) + far  # far (an int64 argument) lies outside any allocation; no mask
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32))


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        out = torch.relu(self.linear(x))
        _bad_store[(1,)](out, 1 << 40, BLOCK=128)
        torch.cuda.synchronize()
        return out
