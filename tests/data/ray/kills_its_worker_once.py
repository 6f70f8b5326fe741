# The first time it is imported, this candidate kills the process that judges it (the Ray
# worker running the evaluation task): to Ray that is a lost worker, and the task is retried.
import os
import pathlib
import signal

import torch
import torch.nn as nn

_marker = pathlib.Path(os.environ["KB_TEST_NODE_LOSS_MARKER"])
if not _marker.exists():
    _marker.write_text(str(os.getppid()))
    os.kill(os.getppid(), signal.SIGKILL)
    os._exit(0)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.addmm(self.linear.bias, x, self.linear.weight.t()).clamp_min(0)
