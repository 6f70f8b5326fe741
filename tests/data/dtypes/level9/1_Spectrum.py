import torch
import torch.nn as nn


class Model(nn.Module):
    """The real FFT of each row (a complex output) and the count of positive inputs (an integer output)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.fft.rfft(x), (x > 0).sum(dim=1)


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
