"""At import (in its build step: the word load_inline makes it a candidate that builds) tries to write
into everything later candidates or the judge would trust: the build cache's other folders and lock
files, the shared precompiled-header wrapper, the lock folder, the judge's own source, the
solutions and problems, the Python installation. Whether a write lasted is checked from outside
the sandbox (inside, a hidden folder is an empty throw-away one)."""
# judge: correct
# check: caches-untouched
# (mentions load_inline, so the judge gives it a build step)
import glob
import os
import sys

import torch
import torch.nn as nn

_landed = []
_targets = ["{{BUILD_DIR}}", "{{BUILD_DIR}}/*", "{{PCH_DIR}}", "{{PCH_DIR}}/cc-*/g++", "{{LOCK_DIR}}", "{{REPO}}/solutions",
            "{{REPO}}/pytest_kernelbench/judge", os.path.dirname(torch.__file__), sys.prefix]
for pattern in _targets:
    for path in glob.glob(pattern):
        try:
            if os.path.isdir(path):
                with open(os.path.join(path, "poisoned-by-candidate"), "w") as fh:
                    fh.write("x")
            else:
                with open(path, "a") as fh:
                    fh.write("\nexit 1\n")
            _landed.append(path)
        except OSError:
            pass


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))
