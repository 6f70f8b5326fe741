"""One timed run per device at a time, across processes (xdist workers, several sessions)."""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock


def device_lock(lock_dir: str | Path, device_key: str) -> FileLock:
    """A per-device file lock. ``device_key`` names the physical device (e.g. its UUID, or "cpu")."""
    folder = Path(lock_dir)
    folder.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device_key)
    return FileLock(str(folder / f"{safe}.lock"))
