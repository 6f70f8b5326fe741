"""Settings for the whole test session."""

import os

import pytest


def pytest_configure(config):
    # No shared precompiled torch/extension.h unless a test asks for one (tests/test_pch.py, each with a root of its own).
    # The judge builds a missing header at the first request for its flags: 85 CPU-seconds on CI's 2-core machine, more
    # than the plain compile (about 55) of a test's one or two builds with those flags; a CI rehearsal at fd75a47 built
    # three such headers (the build-cache test's, the bundled solutions' two) in a cold shared root.
    os.environ.setdefault("KB_PCH_DIR", "off")
    # One pair of runner processes per evaluation unless a test asks for the judge's automatic choice: a candidate near
    # parity on the CPU (the scripted reference of the agent tests, the baselines) is otherwise timed in up to five pairs,
    # each a fresh runner's `import torch`. Tests of the pairs pass --process-pairs / process_pairs themselves.
    os.environ.setdefault("KB_PROCESS_PAIRS", "1")
    # Half a second of timing per candidate (the CPU's default is 2 s) in the judges a test starts as pytest or kbagent:
    # a test's claim is a verdict, not a precise speedup; each side still gets its least samples (10 on the CPU). Tests
    # of the timing give --max-time themselves; in-process judges take cpu_config's 0.2 s (tests/helpers.py).
    os.environ.setdefault("KB_MAX_TIME", "0.5")


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", help="also run the tests marked full: every bundled solution, every "
                     "variant of a behaviour CI proves once (nox -s full; 12 minutes at -n 3 on 2 cores, 2026-12-01)")  # fmt: skip


def pytest_collection_modifyitems(config, items):
    # The tests CI leaves out (its 15 minutes): one behaviour proved again for each of many inputs, or at great cost.
    if not config.getoption("--full"):
        skip = pytest.mark.skip(reason="one of many inputs CI proves once: run with --full (nox -s full)")
        for item in items:
            if item.get_closest_marker("full"):
                item.add_marker(skip)
    # The C++ builds first: with two xdist workers, a minutes-long build left to the end runs while the other worker idles.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def load_generator():
    """A busy machine: a CPU hog on every core this process may use but one for each xdist worker (those left keep the
    suite's other workers going), each in a session of its own (as another user's work would be), for the test's
    duration. Each also stops by itself after 600 s, or as soon as the process that started it is gone: a suite killed
    from outside (a timeout) leaves no hog behind to load whatever runs next on the machine."""
    from helpers import start_hogs

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    hogs = start_hogs(max(1, cores - int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
    count = len(hogs)
    try:
        yield count
    finally:
        for proc in hogs:
            proc.kill()
            proc.wait(10)
