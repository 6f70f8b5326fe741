"""CPU solution: cumsum written straight into a preallocated output."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        return torch.cumsum(x, dim=self.dim, out=out)
