import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Multi-head self-attention: fused qkv projection, softmax(QK^T/sqrt(d))V, output projection."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        # He-style scale keeps the attention logits sharp enough that the output is O(1)
        self.w_qkv = nn.Parameter(torch.randn(3 * embed_dim, embed_dim) * math.sqrt(2.0 / embed_dim))
        self.b_qkv = nn.Parameter(torch.randn(3 * embed_dim) * 0.02)
        self.w_out = nn.Parameter(torch.randn(embed_dim, embed_dim) * math.sqrt(1.0 / embed_dim))
        self.b_out = nn.Parameter(torch.randn(embed_dim) * 0.02)

    def forward(self, x):
        B, S, E = x.shape
        H, D = self.num_heads, self.head_dim
        qkv = torch.matmul(x, self.w_qkv.t()) + self.b_qkv          # (B, S, 3E)
        qkv = qkv.view(B, S, 3, H, D).permute(2, 0, 3, 1, 4)         # (3, B, H, S, D)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)  # (B, H, S, S)
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v)                                   # (B, H, S, D)
        out = out.transpose(1, 2).reshape(B, S, E)
        return torch.matmul(out, self.w_out.t()) + self.b_out


batch_size = 2
seq_len = 256
embed_dim = 512
num_heads = 8


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads]
