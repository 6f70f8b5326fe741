"""Exactly the reference, plus a thread that queues a burst of GPU work (two big matmuls, about the
reference's own time) on a side stream right after each of its calls returns, so that it runs
into whatever is timed next: in a judge that times the reference in that window, the reference
looks slow and the candidate fast. Every runner is stopped between its requests, and after each call
the supervisor waits, on that side's wall clock, until the GPU is quiet: the burst is charged to the
candidate (on the H100: rejected, 42.6 ms a call more than its reported time accounts for)."""
# judge: rejected|correct
# problem: gpu-timing
# speedup-below: 1.15
import threading

import torch
import torch.nn as nn

_go = threading.Event()


def _hog():
    torch.cuda.set_device(0)
    x = torch.randn(8192, 8192, device="cuda")
    stream = torch.cuda.Stream()
    while True:
        _go.wait()
        _go.clear()
        with torch.cuda.stream(stream):
            y = x @ x
            y = y @ x
        stream.synchronize()


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n
        threading.Thread(target=_hog, daemon=True).start()

    def forward(self, a, b):
        out = a @ b
        _go.set()
        return out
