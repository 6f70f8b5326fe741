import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """A float where the reference has an integer beyond a double's range."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x), 1e300
