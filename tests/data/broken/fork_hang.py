import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        import os
        import time
        if os.fork() == 0:
            time.sleep(3600)  # an orphan that must not outlive the evaluation
        time.sleep(3600)
