"""Ignores SIGTERM in itself and in forked children that spin forever, then hangs."""
# judge: timeout
# check: no-survivor
import os
import signal
import sys
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for _ in range(2):
            if os.fork() == 0:
                os.setsid()
                os.execv(sys.executable, [sys.executable, "-c",
                                          "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
                                          "{{MARKER}}"])
        time.sleep(3600)
        return torch.relu(self.linear(x))
