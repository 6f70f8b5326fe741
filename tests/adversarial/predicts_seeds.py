"""Precomputes the answers for the seeds a judge with a fixed base seed would use (42 + trial, ...),
looks each call's input up by value, and answers garbage for anything it did not precompute.

The supervisor draws every call's seed from the OS; the runner never sees one.
"""
# judge: incorrect
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.answers = {}
        with torch.no_grad():
            for seed in [*range(0, 64), *range(40, 3100)]:
                torch.manual_seed(seed)
                x = torch.randn(32, features)
                self.answers[hash(x.numpy().tobytes())] = torch.relu(self.linear(x))

    def forward(self, x):
        found = self.answers.get(hash(x.detach().cpu().numpy().tobytes()))
        if found is None:
            return torch.zeros(x.shape[0], self.linear.out_features, device=x.device)
        return found.to(x.device).clone()
