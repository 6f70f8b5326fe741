"""Not a cheat: a model whose eighth call (the time phase's, after the trials' few) takes 3 s more, as a recompile, an
autotune or a capture that new inputs set off would; every other call is the reference's. ``{{WRONG}}``: that call's
answer is wrong too."""
import time

import torch
import torch.nn as nn

_calls = [0]
WRONG = {{WRONG}}


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        _calls[0] += 1
        out = torch.relu(self.linear(x))
        if _calls[0] == 8:
            time.sleep(3.0)
            if WRONG:
                out = out + 1.0
        return out
