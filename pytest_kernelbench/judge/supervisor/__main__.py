# ruff: noqa: E402  (the clock starts before the imports, torch among them)
"""``python -m pytest_kernelbench.judge.supervisor SPEC.json``: one supervisor process (the fork server calls
:func:`.evaluation.main` directly)."""

import time

_STARTED = time.perf_counter()  # before torch's import: what a fresh interpreter spends starting counts as 'start'

import os
import sys

from pytest_kernelbench.judge.supervisor.evaluation import main

if __name__ == "__main__":
    rc = main(sys.argv, started=_STARTED)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
