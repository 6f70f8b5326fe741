"""Writes a reply frame nested 60,000 levels deep on every socket it inherited, then never answers for real.

The runner's channel is one of its descriptors, so the frame arrives where the supervisor waits for the call's
reply. Decoding it recursed past Python's limit in the supervisor (a RecursionError: the judge's own failure, no
reward); decoding is bounded (transport.decode: 100 levels), so it is this candidate's malformed reply."""
# judge: runtime_error
# says: nested deeper than
# timeout: 30
import os
import stat
import struct
import time

import torch.nn as nn

DEPTH = 60_000


def _forge() -> None:
    body = ('{"ok":true,"error":"","ms":0.001,"values":' + "[" * DEPTH + "]" * DEPTH + "}").encode()
    frame = struct.pack("!I", len(body)) + body
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                view = memoryview(frame)
                while view:
                    view = view[os.write(fd, view):]
        except OSError:
            pass


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        _forge()
        time.sleep(3600)  # the real reply never comes
