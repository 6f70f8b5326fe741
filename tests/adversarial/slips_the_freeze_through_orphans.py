"""The reference itself (tests/data/timing's, so exactly as fast), plus two helpers started at import through a
fork/exit chain: each helper's parent exits at once, so it is reparented away from the runner's process tree. Each
watches the runner and burns the CPU only while the runner is stopped (SIGSTOP, or its cgroup frozen), that is while the
reference is called: a helper the freeze holds never sees it, one that escaped it burns. A judge
that stops the candidate by walking that tree (SIGSTOP to each process it finds) never finds them: the reference is
timed on a busy machine and the candidate looks faster. Judged without bwrap (no PID namespace that would keep the
orphans below the runner): only the runner's cgroup, frozen whole, holds them. Named {{MARKER}} so that the test can
look for them on the whole machine afterwards. Judged with the judge's own pairs of runners (``pairs: 0``): with one pair
a copy of the reference leaned either way beside load (0.65-1.84x, docs/history/judge-log.md), as users never judge it."""
# judge: correct|rejected
# speedup-below: 1.3
# problem: timing
# sandbox: off
# pairs: 0
# check: no-survivor
import os
import sys

import torch
import torch.nn as nn

HELPER = """
import os, sys, time
runner = int(sys.argv[1])


def stopped(runner):
    # SIGSTOP (state t/T) or its cgroup (v2) frozen: a frozen task's state reads S, so look at the cgroup too
    state = open(f"/proc/{runner}/stat").read().rsplit(")", 1)[1].split()[0]
    if state in "tT":
        return True
    mount = next((line.split()[1] for line in open("/proc/self/mounts") if line.split()[2] == "cgroup2"), "")
    own = next((line[3:].strip() for line in open(f"/proc/{runner}/cgroup") if line.startswith("0::")), "")
    try:
        return bool(mount) and "frozen 1" in open(f"{mount}{own}/cgroup.events").read()
    except OSError:
        return False


while True:
    try:
        now_stopped = stopped(runner)
    except (OSError, IndexError):
        os._exit(0)
    if now_stopped:  # the runner is stopped: the reference is being timed (a helper the freeze holds never gets here)
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
    else:
        time.sleep(0.0005)
"""
runner = os.getpid()
for _ in range(2):
    if os.fork() == 0:
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", HELPER, str(runner), "{{MARKER}}"])
        os._exit(0)
    os.wait()


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(features, features), nn.ReLU()) for _ in range(4)])

    def forward(self, x):
        return self.layers(x)
