"""Answers every call, but makes its runner hang when asked to free the phase's buffers, so that the
judge's wait at the end of a phase (outside any stage the candidate is timed in) holds the device.

The candidate's time limit covers that wait too: the judge stops it there, with a timeout.
"""
# judge: timeout
# says: did not free the buffers
import sys
import time

import torch.nn as nn


def _hang(*args, **kwargs):
    time.sleep(3600)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        for module in list(sys.modules.values()):  # the runner runs as __main__: its request handlers are methods
            for value in list(vars(module).values()) if module is not None else ():
                if isinstance(value, type) and hasattr(value, "on_unmap"):
                    value.on_unmap = _hang

    def forward(self, x):
        return self.linear(x)
