"""Settings for the whole test session."""

import os

from pytest_kernelbench.config import default_cache_dir


def pytest_configure(config):
    # pytester runs get a temporary HOME, so each would build its own precompiled torch/extension.h
    # (~1 min, 0.75 GB). One shared root serves them all: a .gch is keyed by compiler, flags and header.
    os.environ.setdefault("KB_PCH_DIR", str(default_cache_dir() / "pch"))


def pytest_collection_modifyitems(config, items):
    # The C++ builds first: with two xdist workers, a minutes-long build left to the end runs while the other worker idles.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
