import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last dimension with a non-trivial affine transform."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=eps)
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.5 * torch.randn(dim))
            self.ln.bias.copy_(0.5 * torch.randn(dim))

    def forward(self, x):
        return self.ln(x)


batch_size = 1024
dim = 1024


def get_inputs():
    # non-zero mean and non-unit variance per element, so the normalisation matters
    return [torch.randn(batch_size, dim) * 3.0 + 1.0]


def get_init_inputs():
    return [dim]
