# judge: rejected
# says: modified input 0 in place
"""Writes into its input so the reference, run afterwards, would see other data."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        out = torch.relu(self.linear(x))
        x.mul_(0)
        return out
