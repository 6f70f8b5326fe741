"""CPU solution: a direct F.layer_norm call (skips the nn.Module indirection)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=eps)
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.5 * torch.randn(dim))
            self.ln.bias.copy_(0.5 * torch.randn(dim))

    def forward(self, x):
        return F.layer_norm(x, self.ln.normalized_shape, self.ln.weight, self.ln.bias, self.ln.eps)
