"""Not a cheat: torch.compile (inductor, Triton kernels) inside ModelNew, judged by outputs and times."""
# judge: correct
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.compiled = torch.compile(self._forward)

    def _forward(self, x):
        return torch.relu(self.linear(x))

    def forward(self, x):
        return self.compiled(x)
