"""The judge's caches on disk, their sizes, their caps, and pruning them (``kbagent cache info|prune``).

* ``builds``: one folder per candidate build (``--build-cache``, :mod:`.cache`), beside its ``<key>.lock``;
* ``jit``: a candidate source's Triton and inductor caches (``jit-<key>`` in the build cache; each trimmed to 2 GiB
  after its judge, their number unbounded but for this);
* ``pch``: shared precompiled ``torch/extension.h`` headers (``--build-pch``, :mod:`.pch`; four kept by use);
* ``bytecode``: torch's bytecode where it is not installed (``KB_BYTECODE_CACHE``, :mod:`.bytecode`);
* ``judge-triton``: the judge's own Triton kernels (``<cache>/triton-judge``, :mod:`pytest_kernelbench.judge.fused`).

Pruning removes whole entries, the least recently used first (a folder's newest modification time), until the
cache is within its cap; an entry used in the last :data:`IN_USE_S` seconds, or a build whose lock another judge
holds, is never removed. The end of every pytest run prunes each cache to its cap (:func:`enforce_caps`); caps
default to :data:`DEFAULT_CAPS_GB`, set by ``KB_CACHE_CAPS`` (``builds=20,jit=5``; ``off``: no pruning at the end of
a run).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from ..config import default_cache_dir
from ..errors import KernelBenchUsageError

GIB = 1 << 30
DEFAULT_CAPS_GB = {"builds": 20.0, "jit": 10.0, "pch": 3.0, "bytecode": 2.0, "judge-triton": 1.0}
CAPS_ENV = "KB_CACHE_CAPS"
IN_USE_S = 600.0  # an entry touched this recently may be in use by a judge now


@dataclasses.dataclass
class Entry:
    path: Path
    size: int
    used: float  # newest modification time of the entry or anything in it
    lock: Path | None = None  # held by a judge building it (builds)


@dataclasses.dataclass
class Cache:
    name: str
    root: Path
    cap: int | None  # bytes; None: no cap

    def entries(self) -> list[Entry]:
        if not self.root.is_dir():
            return []
        found = []
        for path in sorted(self.root.iterdir()):
            if self._belongs(path):
                size, used = _measure(path)
                lock = path.with_name(path.name + ".lock") if self.name == "builds" else None
                found.append(Entry(path, size, used, lock))
        return found

    def _belongs(self, path: Path) -> bool:
        if self.name == "builds":
            return path.is_dir() and not path.name.startswith("jit-")
        if self.name == "jit":
            return path.is_dir() and path.name.startswith("jit-")
        if self.name == "pch":
            return path.is_dir() or path.suffix == ".seen"
        return True


def caches(build_dir: str = "", pch_dir: str = "") -> list[Cache]:
    """Every cache the judge keeps, where this machine's settings put them (``--build-cache``, ``--build-pch``, env)."""
    caps = caps_gb()
    builds = Path(build_dir or os.environ.get("KB_BUILD_CACHE") or default_cache_dir() / "builds")
    pch = pch_dir or os.environ.get("KB_PCH_DIR") or str(default_cache_dir() / "pch")
    bytecode = os.environ.get("KB_BYTECODE_CACHE") or str(default_cache_dir() / "bytecode")
    judge_triton = default_cache_dir() / "triton-judge"
    roots = {"builds": builds, "jit": builds, "pch": Path(pch), "bytecode": Path(bytecode), "judge-triton": judge_triton}
    return [Cache(name, root, None if caps.get(name) is None else int(caps[name] * GIB)) for name, root in roots.items()
            if str(root) != "off"]  # fmt: skip


def caps_gb(setting: str | None = None) -> dict[str, float | None]:
    """The cap of each cache in GB: the defaults, changed by ``KB_CACHE_CAPS`` (``name=GB,...``; ``name=none``: no cap)."""
    text = os.environ.get(CAPS_ENV, "") if setting is None else setting
    caps: dict[str, float | None] = dict(DEFAULT_CAPS_GB)
    if text in ("", "off"):
        return caps
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if name not in caps:
            raise KernelBenchUsageError(f"{CAPS_ENV}: no cache {name!r}; the caches are {', '.join(caps)}")
        try:
            caps[name] = None if value == "none" else float(value)
        except ValueError:
            raise KernelBenchUsageError(f"{CAPS_ENV}: {part!r} is not name=GB (e.g. builds=20) or name=none") from None
    return caps


def _measure(path: Path) -> tuple[int, float]:
    try:
        top = path.lstat()
    except OSError:
        return 0, 0.0
    size, used = (0 if path.is_dir() else top.st_size), top.st_mtime
    if path.is_dir() and not path.is_symlink():
        for item in _walk(path):
            try:
                found = item.lstat()
            except OSError:
                continue
            size += found.st_size if not item.is_dir() else 0
            used = max(used, found.st_mtime)
    return size, used


def _walk(folder: Path) -> Iterator[Path]:
    """Everything under ``folder``, symlinks not followed, at any depth (iteratively: no recursion limit)."""
    stack = [folder]
    while stack:
        try:
            children = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for child in children:
            yield Path(child.path)
            if child.is_dir(follow_symlinks=False):
                stack.append(Path(child.path))


@dataclasses.dataclass
class Pruned:
    cache: str
    removed: int = 0
    freed: int = 0
    kept_in_use: int = 0


def prune(cache: Cache, *, max_bytes: int | None, older_than_s: float | None = None, dry_run: bool = False,
          now: float | None = None) -> Pruned:  # fmt: skip
    """Remove ``cache``'s least recently used entries until it holds ``max_bytes`` at most (None: no size bound), and
    every entry unused for ``older_than_s`` seconds; entries in use are kept."""
    now = time.time() if now is None else now
    entries = sorted(cache.entries(), key=lambda e: e.used)  # the least recently used first
    total = sum(e.size for e in entries)
    done = Pruned(cache.name)
    for entry in entries:
        over = max_bytes is not None and total > max_bytes
        old = older_than_s is not None and now - entry.used > older_than_s
        if not (over or old):
            continue
        if now - entry.used < IN_USE_S or not _remove(entry, dry_run):
            done.kept_in_use += 1
            continue
        total -= entry.size
        done.removed += 1
        done.freed += entry.size
    return done


def _remove(entry: Entry, dry_run: bool) -> bool:
    """Remove one entry (under its build lock, where it has one); False when a judge holds it."""
    lock = FileLock(str(entry.lock), timeout=0) if entry.lock is not None and entry.lock.exists() else None
    try:
        if lock is not None:
            lock.acquire()
    except Timeout:
        return False
    try:
        if not dry_run:
            if entry.path.is_dir() and not entry.path.is_symlink():
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                entry.path.unlink(missing_ok=True)
        return True
    finally:
        if lock is not None:
            lock.release()


def enforce_caps(build_dir: str = "", pch_dir: str = "") -> list[Pruned]:
    """Every cache pruned to its cap (the end of a pytest run); nothing with ``KB_CACHE_CAPS=off``."""
    if os.environ.get(CAPS_ENV, "") == "off":
        return []
    return [prune(cache, max_bytes=cache.cap) for cache in caches(build_dir, pch_dir) if cache.cap is not None]


def gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"
