import torch
import torch.nn as nn


class Model(nn.Module):
    """sigmoid of tiny values: about 0.5 whatever the input (METR's near-constant kind of problem)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sigmoid(x * 1e-6)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
