import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The tiny problem's answer shifted by 1e-3: outside KernelBench's float32 tolerance (1e-4), inside PIKE's (1e-2)."""

    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x)) + 1e-3
