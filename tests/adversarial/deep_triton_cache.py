"""Builds a chain of folders 1,200 deep (past PATH_MAX) in its own Triton cache, which the judge keeps per source and
trims after each judgment. The trim walked the cache recursively (a RecursionError after the verdict: the judge's own
failure, no reward); it is iterative and bounded (build/tree.py), and a cache too deep to measure is emptied."""
# judge: correct
# check: jit-cache-trimmed
import os

import torch
import torch.nn as nn

DEPTH = 1200


def _deep_chain(root: str) -> None:
    os.makedirs(root, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(DEPTH):
            try:
                os.mkdir("d" * 20, dir_fd=fd)
            except FileExistsError:  # a second runner of the same source
                pass
            below = os.open("d" * 20, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
    finally:
        os.close(fd)


if os.environ.get("TRITON_CACHE_DIR"):
    _deep_chain(os.environ["TRITON_CACHE_DIR"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))
