"""A trusted bytecode cache for the judge's processes, where torch's is not installed.

Every evaluation starts fresh interpreters that import torch: a sandboxed build step and the
candidate's runner. An installation without ``__pycache__`` folders (installed with ``--no-compile``,
or read-only, with ``PYTHONDONTWRITEBYTECODE`` set: the H100 machine this project is measured on)
makes each of them compile torch's Python sources again: there ``import torch`` took 6.6 s of CPU,
4.3 s with this cache (1.9 s once OpenBLAS's threads sleep: ``sandbox.TIMING_ENV``), in two processes a
candidate, on a machine whose cores the builds already fill.

So when torch's own bytecode is missing, the judge's processes get ``PYTHONPYCACHEPREFIX``: a folder
filled once per machine by a trusted interpreter that imports what runners and build steps import,
read-only to the sandboxed ones (they also run with ``PYTHONDONTWRITEBYTECODE``: candidate code
never writes there). Python checks each cached file against its source's size and mtime, so a changed
installation only costs the speed-up. ``KB_BYTECODE_CACHE``: the folder (default
``<cache>/bytecode``), or ``off``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

# what a runner or a build step imports beyond the standard library (the first must be importable)
MODULES = ("torch", "torch.utils.cpp_extension", "torch.profiler", "numpy", "triton", "pytest_kernelbench.judge.runner")
FILL_TIMEOUT_S = 600.0


def installed_bytecode(module: str) -> bool:
    """Whether ``module``'s own ``__pycache__`` has its bytecode (the usual pip install)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True  # nothing to cache
    cached = os.path.join(os.path.dirname(spec.origin), "__pycache__", os.path.basename(importlib.util.cache_from_source(spec.origin)))
    return os.path.exists(cached)


@functools.cache
def bytecode_prefix(folder: str = "", modules: tuple[str, ...] = MODULES) -> str | None:
    """``PYTHONPYCACHEPREFIX`` for the judge's processes, filled if it needs to be; None where the installation has
    its bytecode, the cache is off, or it cannot be filled (then nothing changes)."""
    setting = folder or os.environ.get("KB_BYTECODE_CACHE", "")
    if setting == "off" or installed_bytecode(modules[0]):
        return None
    if not setting:
        from ..config import default_cache_dir

        setting = str(default_cache_dir() / "bytecode")
    root = Path(setting).resolve() / sys.implementation.cache_tag
    spec = importlib.util.find_spec(modules[0])
    origin = Path(spec.origin) if spec and spec.origin else Path(sys.executable)
    tag = hashlib.sha256(f"{sys.executable}\0{origin}\0{origin.stat().st_mtime_ns}\0{modules}".encode()).hexdigest()[:16]
    marker = root / f"filled-{tag}"
    if marker.exists():
        return str(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock

        with FileLock(str(root / ".lock"), timeout=FILL_TIMEOUT_S):
            if not marker.exists() and _fill(root, modules):
                marker.touch()
    except (OSError, TimeoutError):
        return None
    return str(root) if marker.exists() else None


def _fill(root: Path, modules: tuple[str, ...]) -> bool:
    """Import ``modules`` (those installed) in a trusted interpreter that writes their bytecode under ``root``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(root)
    code = ("import importlib, importlib.util\n"
            f"for name in {list(modules)!r}:\n"
            "    if importlib.util.find_spec(name.split('.')[0]) is not None:\n"
            "        importlib.import_module(name)\n")  # fmt: skip
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=FILL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
