"""CPU solution: both biases folded into one addmm, GELU applied on the GEMM output."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        bias = self.linear.bias + self.bias                    # tiny (out_features,) vector
        y = torch.addmm(bias, x.reshape(-1, x.shape[-1]), self.linear.weight.t())
        return F.gelu(y).reshape(*x.shape[:-1], y.shape[-1])
