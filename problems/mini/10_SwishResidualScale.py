import torch
import torch.nn as nn


class Model(nn.Module):
    """Fused elementwise chain: (x * sigmoid(x) + residual) * scale, then clamp."""

    def __init__(self, scale, clamp_value):
        super().__init__()
        self.scale = scale
        self.clamp_value = clamp_value

    def forward(self, x, residual):
        y = x * torch.sigmoid(x)
        y = y + residual
        y = y * self.scale
        return torch.clamp(y, min=-self.clamp_value, max=self.clamp_value)


batch_size = 256
dim = 4096
scale = 0.75
clamp_value = 2.5


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [scale, clamp_value]
