import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The spectrum right, the count one too many in one row."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        counts = (x > 0).sum(dim=1)
        counts[0] += 1
        return torch.fft.rfft(x), counts
