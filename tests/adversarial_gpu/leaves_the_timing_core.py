# judge: correct
"""Moves every one of its threads off the core the judge binds a GPU timing phase's runners to, in every call, and
starts a thread of its own, hoping to dispatch from a quieter core than the reference's. Each time the supervisor stops
it, its threads are bound back (``extra.timing_core.moved_back`` counts them); what it can gain is what one call's
dispatch gains in between."""
import os
import threading

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.everywhere = set(range(os.cpu_count() or 1))

    def forward(self, x):
        for tid in map(int, os.listdir("/proc/self/task")):
            try:
                os.sched_setaffinity(tid, self.everywhere)
            except OSError:
                pass
        threading.Thread(target=lambda: None).start()
        return self.linear(x).relu()
