import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Leaky ReLU followed by multiplication with a constant scale."""

    def __init__(self, negative_slope, scale):
        super().__init__()
        self.negative_slope = negative_slope
        self.scale = scale

    def forward(self, x):
        return F.leaky_relu(x, negative_slope=self.negative_slope) * self.scale


batch_size = 256
dim = 8192
negative_slope = 0.1
scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [negative_slope, scale]
