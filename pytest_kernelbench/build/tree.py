"""Measuring and removing folders a candidate wrote (its build folder, its Triton and inductor caches).

What is in them is the candidate's to shape: a chain of folders thousands deep, paths past ``PATH_MAX``, symlinks
anywhere, millions of entries. Both functions here are iterative (no recursion to overflow), follow no symlink, stop
after :data:`MAX_ENTRIES` entries and never raise: a folder they cannot measure counts as too big, one they cannot
remove is left as it is.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

MAX_ENTRIES = 1_000_000  # entries one call looks at
MAX_DEPTH = 64  # folders deeper than this make a tree "too big" to keep


def tree_size(root: Path, limit: int) -> int:
    """The bytes of the regular files under ``root``, or more than ``limit`` once it is over it, deeper than
    :data:`MAX_DEPTH`, past :data:`MAX_ENTRIES` entries, or unreadable anywhere."""
    over = limit + 1
    total, seen = 0, 0
    pending = [(str(root), 0)]
    while pending:
        folder, depth = pending.pop()
        if depth > MAX_DEPTH:
            return over
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        return over
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((entry.path, depth + 1))
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                        if total > limit:
                            return over
        except OSError:
            return over
    return total


def remove_tree(top: Path, keep_top: bool = False) -> None:
    """Remove ``top`` and everything under it (only what is under it, with ``keep_top``), at any depth.

    Every folder found below the first level is first moved up into ``top`` under a fresh name, so no path used is
    ever more than two folders below ``top``; whatever cannot be removed (or lies past :data:`MAX_ENTRIES`) stays."""
    try:
        if top.is_symlink() or not top.is_dir():
            if not keep_top:
                top.unlink(missing_ok=True)
            return
    except OSError:
        return
    tag, seen = uuid.uuid4().hex[:12], 0
    pending, emptied = [str(top)], []
    while pending and seen < MAX_ENTRIES:
        folder = pending.pop()
        emptied.append(folder)
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        break
                    folder_next = _cleared(entry, folder == str(top), top, f".kb-removing-{tag}-{seen}")
                    if folder_next:
                        pending.append(folder_next)
        except OSError:
            continue
    for folder in reversed(emptied[1:] if keep_top else emptied):  # ``top`` last: moved-up folders are in it
        try:
            os.rmdir(folder)
        except OSError:
            pass


def _cleared(entry: os.DirEntry, at_top: bool, top: Path, fresh: str) -> str:
    """A folder to empty next (moved up into ``top`` unless it is there already), or "" once a non-folder is gone."""
    try:
        if not entry.is_dir(follow_symlinks=False):
            os.unlink(entry.path)
            return ""
        if at_top:
            return entry.path
        moved = str(top / fresh)
        os.rename(entry.path, moved)
        return moved
    except OSError:
        return ""
