"""Announces a harness stage ('reference', whose time is not the candidate's) on every status file it
finds, then hangs, hoping the time limit stops counting."""
# judge: timeout
import glob
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        for path in glob.glob("/tmp/**/status.log", recursive=True):
            try:
                with open(path, "a") as fh:
                    fh.write("reference 0.0\n")
            except OSError:
                pass
        print("reference")  # a stage name on stdout, for a parser that reads the log
        time.sleep(3600)
        return torch.relu(self.linear(x))
