# judge: correct
# strict: rejected
"""A 'custom kernel' that always fails, with a silent fallback to PyTorch: correct, but --strict rejects it."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        try:
            raise RuntimeError('custom kernel not built')
        except RuntimeError:
            return torch.relu(self.linear(x))
