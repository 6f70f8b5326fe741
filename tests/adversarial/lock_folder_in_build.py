"""In its build step (the word load_inline makes it a candidate that builds) leaves a folder named ``lock`` in an
extension folder of its build folder, where torch keeps its build baton, beside a library file so that the folder
looks built. The judge removes a baton a killed build left before judging the same source again; a folder there was
an IsADirectoryError on the re-judge (the judge's own failure, no reward). Now the extension folder is corrupt: it is
removed and built again, and the re-judge concludes what the first judgment did."""
# judge: correct
# check: judged-again
import os

import torch
import torch.nn as nn

_folder = os.environ.get("TORCH_EXTENSIONS_DIR")
if _folder:
    try:
        os.makedirs(os.path.join(_folder, "kb_lockdir", "lock", "inner"), exist_ok=True)
        with open(os.path.join(_folder, "kb_lockdir", "kb_lockdir.so"), "w") as fh:
            fh.write("not a library")
    except OSError:  # the runner's view of the folder may be read-only: the build step's write is the one that lasts
        pass


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))
