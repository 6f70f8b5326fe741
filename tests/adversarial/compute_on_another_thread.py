"""Runs its PyTorch fallback on a worker thread and waits for it: a tracer that only watches the calling
thread sees no compute op. Correct; under --kb-strict the profiler sees every thread."""
# judge: correct
# strict: rejected
import concurrent.futures

import torch
import torch.nn as nn

_pool = concurrent.futures.ThreadPoolExecutor(1)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return _pool.submit(lambda: torch.relu(self.linear(x))).result()
