"""Exactly the reference, plus a thread that keeps the GPU busy with big matmuls whenever the candidate is
not being called: in a judge that times the reference while the candidate's kernels still run, the
reference looks slow and the candidate fast. Its CPU side is stopped while the reference is timed,
and the reference is timed again alone once the candidate's process is gone."""
# judge: correct
# problem: gpu-timing
# speedup-below: 1.15
import threading
import time

import torch
import torch.nn as nn

_last_call = [time.monotonic()]


def _hog():
    torch.cuda.set_device(0)
    x = torch.randn(8192, 8192, device="cuda")
    stream = torch.cuda.Stream()
    while True:
        if time.monotonic() - _last_call[0] > 0.0005:
            with torch.cuda.stream(stream):
                for _ in range(4):
                    x = x @ x * 1e-4
        time.sleep(0.0002)


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n
        threading.Thread(target=_hog, daemon=True).start()

    def forward(self, a, b):
        _last_call[0] = time.monotonic()
        return a @ b
