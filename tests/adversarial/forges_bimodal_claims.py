"""Rewrites the 'ms' of its replies to alternate between a hundredth and ten times the measured time: each side's median
of claims lands between the two modes, while a median of the rounds' log ratios lands on their geometric mean, a
gain the wall clock never vouched for (the clock's check reads medians). Any verdict but a gain."""
# judge: correct|rejected
# problem: timing
# speedup-below: 1.15
import itertools
import sys

import torch.nn as nn

_transport = sys.modules.get("pytest_kernelbench.judge.transport")
if _transport is not None:
    _send = _transport.Channel.send
    _scale = itertools.cycle((0.01, 10.0))

    def _send_bimodal(self, message, fds=()):
        if isinstance(message, dict) and "ms" in message:
            message = {**message, "ms": message["ms"] * next(_scale)}
        if isinstance(message, dict) and isinstance(message.get("calls"), list):  # a round's replies
            message = {**message, "calls": [{**c, "ms": c["ms"] * next(_scale)} for c in message["calls"]]}
        return _send(self, message, fds)

    _transport.Channel.send = _send_bimodal


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(features, features), nn.ReLU()) for _ in range(4)])

    def forward(self, x):
        return self.layers(x)
