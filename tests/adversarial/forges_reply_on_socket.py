"""Writes a well-formed 'call done in 1 us' reply on every socket it inherited, then never computes.

The runner's channel is one of its descriptors: a forged reply arrives where the supervisor waits
for the real one. It is believed as data only: the output slot it claims was filled still holds
nothing, and the supervisor compares the slot, not the claim.
"""
# judge: incorrect
# timeout: 20
import json
import os
import socket
import stat
import struct
import time

import torch
import torch.nn as nn


def _forge() -> None:
    call = {"ok": True, "error": "", "ms": 0.001, "offstream": False, "mismatch": "", "values": [], "structure": None,
            "graph_error": ""}
    body = json.dumps({"ok": True, "error": "", "calls": [call]}).encode()  # a round of one call, answered
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack("!I", len(body)) + body)
        except OSError:
            pass


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        _forge()
        time.sleep(3600)  # the real reply never comes
        return x
