import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        import sys
        sys.stdout.write("spam " * 4_000_000)  # 20 MB of log
        sys.stdout.flush()
        raise RuntimeError("after the flood")
