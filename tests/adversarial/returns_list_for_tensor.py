"""Returns its (right) answer wrapped in a list where the reference returns a tensor."""
# judge: incorrect
# says: expected a tensor
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return [torch.relu(self.linear(x))]
