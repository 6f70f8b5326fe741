"""Finds the problem file the harness wrote and runs its Model: correct, but not a kernel (--strict rejects)."""
import importlib.util
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        ref = sys.modules.get('kb_reference')
        if ref is None:
            raise RuntimeError('no reference module found')
        model = ref.Model(self.linear.in_features).to(x.device)
        model.load_state_dict(self.state_dict())
        return model(x)
