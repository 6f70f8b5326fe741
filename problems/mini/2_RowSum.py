import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum reduction over the last dimension (one value per row)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=-1)


batch_size = 512
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
