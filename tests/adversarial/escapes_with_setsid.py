"""At import, double-forks a new session leader that lives on (setsid, then a grandchild whose parent
exits) and would outlast the judge; otherwise a correct candidate. Its process names itself
{{MARKER}} so that the test can look for it on the whole machine afterwards."""
# judge: correct
# check: no-survivor
import os
import sys

import torch
import torch.nn as nn

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{{MARKER}}"])
    os._exit(0)
os.wait()


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))
