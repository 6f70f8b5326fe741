"""Claims 1e308 ms for every call of a round: each claim is a finite float, their sum is not.

The supervisor summed a round's claims with math.fsum, which raises OverflowError past the largest float: the judge's
own failure (harness_error, no reward). A claim is now read as a time of at most protocol.MAX_MS, so this is the
candidate's malformed reply."""
# judge: runtime_error
# says: not a time from 0
# problem: timing
# round-calls: 4
import sys

import torch.nn as nn

_transport = sys.modules.get("pytest_kernelbench.judge.transport")
if _transport is not None:
    _send = _transport.Channel.send

    def _send_huge(self, message, fds=()):
        if isinstance(message, dict) and "ms" in message:
            message = {**message, "ms": 1e308}
        if isinstance(message, dict) and isinstance(message.get("calls"), list):  # a round's replies
            message = {**message, "calls": [{**c, "ms": 1e308} for c in message["calls"]]}
        return _send(self, message, fds)

    _transport.Channel.send = _send_huge


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(features, features), nn.ReLU()) for _ in range(4)])

    def forward(self, x):
        return self.layers(x)
