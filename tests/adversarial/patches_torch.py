"""Slows down the reference by wrapping torch.nn.functional.linear, which the reference uses.

In a judge that runs the reference in the candidate's process this made the reference 10 ms per
call slower and the candidate look fast. The reference runs in the supervisor.
"""
# judge: correct
# speedup-below: 2.0
import time

import torch.nn.functional as F

_linear = F.linear


def _slow_linear(*args, **kwargs):
    time.sleep(0.01)
    return _linear(*args, **kwargs)


F.linear = _slow_linear

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(_linear(x, self.linear.weight, self.linear.bias))
