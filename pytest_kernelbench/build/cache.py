"""A build folder per candidate, keyed by what decides the binary.

``load_inline`` builds into ``$TORCH_EXTENSIONS_DIR/<name>``. With one shared folder,
two candidates that both call their extension ``custom_kernel`` rebuild over each
other, and a process can load the other candidate's freshly built library. Here every
candidate gets its own folder named by a hash of its source, the torch/CUDA/Python
versions, the GPU architecture and the compiler settings: re-judging an unchanged
candidate loads the cached library with no compile, and different candidates never
share a folder. Only the candidate's sandboxed build step can write its folder; its runner
sees it through a throw-away overlay (:mod:`pytest_kernelbench.judge.sandbox`).

Concurrent judges of the same candidate are serialised on a file lock per key, beside
the folder (``<key>.lock`` in the cache root, which no sandboxed process sees). The
lock dies with its process, unlike torch's own ``lock`` baton file, which a killed
build leaves behind and which would make every later build wait forever: it is
removed while our lock is held. The folder is the candidate's build step's to write,
so nothing in it may stop a judge: an extension folder whose baton is not a file (a
folder named ``lock``, say) is removed whole and built again.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import platform
import sys
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from .tree import remove_tree

# Environment that changes what the compiler produces (PYTORCH_NVCC: the nvcc wrapper, build/light.py, and its tiers).
_COMPILER_ENV = ("CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_FLAGS", "TORCH_NVCC_FLAGS", "TORCH_CUDA_ARCH_LIST", "CUDA_HOME",
                 "PYTORCH_NVCC")  # fmt: skip


def build_key(source: str, torch: Any, device: Any, env: dict[str, str] | None = None) -> str:
    """Hash of what decides the binary; ``env`` (the build step's own settings) wins over this process's environment."""
    env = {**os.environ, **(env or {})}
    parts = [
        source,
        torch.__version__,
        str(torch.version.cuda),
        platform.python_version(),
        platform.machine(),
        sys.platform,
    ]
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        parts.append(f"sm_{major}{minor}")
    parts += [f"{name}={env.get(name, '')}" for name in _COMPILER_ENV]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


MAX_EXTENSIONS = 10_000  # extension folders of one build folder looked at for batons


class BuildFolder:
    """``with BuildFolder(root, key):`` holds the key's lock (the sandboxed build step writes the folder meanwhile)."""

    def __init__(self, root: str | os.PathLike[str], key: str, timeout: float = -1):
        self.path = Path(root) / key
        self._lock = FileLock(str(Path(root) / f"{key}.lock"), timeout=timeout)

    def __enter__(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        os.utime(self.path)  # used now: pruning removes the least recently used folders first (build/prune.py)
        self._clear_batons()
        return self.path

    def _clear_batons(self) -> None:
        """torch's batons left by a build that was killed (nobody else builds here now); no symlink followed."""
        try:
            with os.scandir(self.path) as entries:
                folders = [e.path for e in itertools.islice(entries, MAX_EXTENSIONS) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for folder in folders:
            try:
                os.unlink(os.path.join(folder, "lock"))
            except FileNotFoundError:
                pass
            except OSError:  # not a file the judge can remove: a corrupt extension folder, built again
                remove_tree(Path(folder))

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    @property
    def cached(self) -> bool:
        """Whether a library was built here before."""
        return any(self.path.glob("*/*.so"))


def finished_build(root: str | os.PathLike[str], key: str, wait: float) -> Path | None:
    """The key's folder if a finished build is there now: one with a library, once its lock is had within ``wait``
    seconds (a pool's build step that only finds it cached holds it for moments). One without a library is not waited
    for: its build is in flight or not started, and holds the lock for minutes (the PIKE corpus on x2, 3abea1f: a
    judge waited the whole ``wait``, 2 s, for one candidate in ten, at the start of its reference's stage)."""
    folder = BuildFolder(root, key, timeout=wait)
    if not folder.cached:
        return None
    try:
        with folder:
            return folder.path if folder.cached else None
    except Timeout:
        return None
