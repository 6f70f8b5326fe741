"""CPU solution: one SiLU kernel, then the rest of the chain in place (one allocation instead of four)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, scale, clamp_value):
        super().__init__()
        self.scale = scale
        self.clamp_value = clamp_value

    def forward(self, x, residual):
        y = F.silu(x)
        y.add_(residual).mul_(self.scale)
        return y.clamp_(-self.clamp_value, self.clamp_value)
