"""How long the device lock stays unused when one judge lets it go and another has been waiting for it: filelock's
SQLite-backed ReadWriteLock waits in SQLite's busy handler, whose sleeps grow the longer a waiter has waited. One
process holds the lock exclusively for HOLD seconds while another waits (exclusively or shared), then lets it go; the
time from the release to the waiter holding the lock is printed.

    python benchmarks/experiments/lock_handoff.py --holds 0.05,0.5,2 --trials 8 --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pytest_kernelbench.judge.locking import device_lock  # noqa: E402


def waiter(folder: str, said: multiprocessing.Queue, shared: bool) -> None:
    lock = device_lock(folder, "device")
    said.put(time.time())
    lock.acquire(shared=shared)
    said.put(time.time())
    lock.release()


def handoff_ms(folder: str, hold: float, shared: bool) -> float:
    lock = device_lock(folder, "device").acquire()
    said: multiprocessing.Queue = multiprocessing.Queue()
    other = multiprocessing.Process(target=waiter, args=(folder, said, shared))
    other.start()
    said.get()
    time.sleep(hold)
    released = time.time()
    lock.release()
    held = said.get()
    other.join()
    return (held - released) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holds", default="0.05,0.5,2", help="seconds the waiter waits before the release")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    multiprocessing.set_start_method("spawn")  # filelock refuses a lock database that was open across fork()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for shared in (False, True):
            for hold in map(float, args.holds.split(",")):
                found = [handoff_ms(folder, hold, shared) for _ in range(args.trials)]
                rows.append({"waiter": "shared" if shared else "exclusive", "waited_s": hold,
                             "median_ms": round(statistics.median(found), 2), "mean_ms": round(statistics.mean(found), 2),
                             "max_ms": round(max(found), 2)})
                print(json.dumps(rows[-1]), flush=True)
    Path(args.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
