"""At import, writes 256 MiB to its standard output and tries to reserve 1.5 GiB behind it (fallocate): against a judge
whose log file is the runner's stdout, the disk fills. Its output reaches the supervisor through a pipe, read and kept
bounded there; fallocate on a pipe fails. Otherwise a correct candidate."""
# judge: correct
import os

import torch
import torch.nn as nn

try:
    os.posix_fallocate(1, 0, 3 << 29)
except OSError:
    pass
chunk = b"x" * (1 << 20)
for _ in range(256):
    os.write(1, chunk)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))
