import torch
import torch.nn as nn


class Model(nn.Module):
    """One 8192 x 8192 matmul: about 1.5 ms on an H100, well above the supervisor's clock resolution
    (the GPU clock-forgery tests need that). Too slow for a CPU: GPU tests only."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, a, b):
        return a @ b


n = 8192


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return [n]
