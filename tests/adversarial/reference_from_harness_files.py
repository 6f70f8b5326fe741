"""Looks for the harness's reference module to run its Model: there is none in the candidate's process."""
# judge: runtime_error
# says: no reference module found
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        ref = next((m for name, m in sys.modules.items() if "reference" in name or "problem" in name), None)
        if ref is None or not hasattr(ref, "Model"):
            raise RuntimeError("no reference module found")
        model = ref.Model(self.linear.in_features).to(x.device)
        model.load_state_dict(self.state_dict())
        return model(x)
