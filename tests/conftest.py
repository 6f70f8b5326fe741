"""Settings for the whole test session."""

import os

from pytest_kernelbench.config import default_cache_dir


def pytest_configure(config):
    # pytester runs get a temporary HOME, so each would build its own precompiled torch/extension.h
    # (~1 min, 0.75 GB). One shared root serves them all: a .gch is keyed by compiler, flags and header.
    os.environ.setdefault("KB_PCH_DIR", str(default_cache_dir() / "pch"))
