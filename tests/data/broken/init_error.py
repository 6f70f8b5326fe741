import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        raise ValueError("cannot build this kernel for %d features" % features)
