# judge: incorrect
# says: shape (1, 32, 128), expected (32, 128)
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x)).unsqueeze(0)
