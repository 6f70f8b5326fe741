import torch
import torch.nn as nn


class Model(nn.Module):
    """Four Linear+ReLU layers: a few milliseconds per call on a CPU core, so that the supervisor's clock
    resolves a candidate's time well above its noise (the clock-forgery tests need that)."""

    def __init__(self, features):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(features, features), nn.ReLU()) for _ in range(4)])

    def forward(self, x):
        return self.layers(x)


features = 512


def get_inputs():
    return [torch.randn(256, features)]


def get_init_inputs():
    return [features]
