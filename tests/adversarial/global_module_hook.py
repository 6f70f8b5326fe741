"""Registers a global forward hook on every nn.Module: in a process that also runs the reference,
the reference's output would be replaced by the candidate's (wrong) one."""
# judge: incorrect
import torch
import torch.nn as nn


def _same_as_mine(module, args, output):
    if isinstance(output, torch.Tensor):
        return torch.zeros_like(output)
    return output


nn.modules.module.register_module_forward_hook(_same_as_mine)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.zeros(x.shape[0], self.linear.out_features, device=x.device)
