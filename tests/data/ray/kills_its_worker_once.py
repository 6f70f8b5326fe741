# A problem (trusted code: the supervisor loads it) whose first import kills the process that
# judges it, the Ray worker running the evaluation task: to Ray that is a lost worker, and the
# task is retried. The supervisor is forked by a fork server that the Ray worker started, or by
# the Ray worker itself (KB_WORKER_START=spawn): walk up past the fork server.
import os
import pathlib
import signal

import torch
import torch.nn as nn


def _judging_process() -> int:
    pid = os.getppid()
    cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    if b"pytest_kernelbench.judge.forkserver" in cmdline:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pid


_marker = pathlib.Path(os.environ["KB_TEST_NODE_LOSS_MARKER"])
if not _marker.exists():
    _victim = _judging_process()
    _marker.write_text(str(_victim))
    os.kill(_victim, signal.SIGKILL)
    os._exit(0)


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))


features = 128


def get_inputs():
    return [torch.randn(32, features)]


def get_init_inputs():
    return [features]
