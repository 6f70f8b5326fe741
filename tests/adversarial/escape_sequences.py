"""Raises an error whose text clears the line and draws a green 'correct 48.000x' (and rich markup saying the same),
so that a person reading the verdict in a terminal would see a success. The verdict is the runtime error it is; every
human-facing output shows the escape sequences as text (pytest_kernelbench/report/text.py: printable), never sends them."""
# judge: runtime_error
# says: correct 48.000x
import sys

import torch.nn as nn

FAKE = "\r\x1b[2K\x1b[1A\x1b[2K\x1b[32mcorrect\x1b[0m L1-1: 48.000x (reward +47.000) [green]correct 48.000x[/green]\x1b]0;ok\x07"

print(FAKE, file=sys.stderr, flush=True)  # into the runner's log: its tail reaches the message too


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        raise RuntimeError(FAKE)
