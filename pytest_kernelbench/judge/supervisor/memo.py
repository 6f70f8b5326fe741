"""A problem's footprint, remembered across the judges of one machine (the lock folder, which only supervisors see).

The reference's first call holds the device alone (eager mode): before it, the judge knows neither its runner's peak
memory (what a shared phase is admitted for) nor a quiet GPU's probe time. A judge that measured both so writes them
here, under the device's key and a digest of everything that shapes the reference's run (the problem's source, mode,
seed, float32 precision, where inputs are made, torch's version); a later judge of the same problem there runs that first call in a shared
phase admitted for it, and takes the probe floor measured alone (Evaluation.reference). A search's hundreds of attempts
at one task hold the device alone for their reference once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from .plan import PROBE_FLOOR_MAX_S, Footprint

VERSION = 1


@dataclasses.dataclass(frozen=True)
class Remembered:
    fp: Footprint  # the reference's first call, as an earlier judge measured it holding the device alone
    quiet_s: float | None  # a probe's round trip on the quiet GPU (None on the CPU)


def memo_for(ctx: Any, device_key: str) -> Path | None:
    """Where this evaluation's problem's footprint on its device is remembered: in eager mode, for the judge's own
    problems (a client's could show one footprint and then another), not in a compile-only check; ``KB_FOOTPRINT_MEMO=0``:
    nowhere. ``ctx``: the evaluation's Context."""
    cfg = ctx.cfg
    if cfg.mode != "eager" or cfg.problem_sandbox or ctx.cpu_check or os.environ.get("KB_FOOTPRINT_MEMO", "1") == "0":
        return None
    shaping = {"mode": cfg.mode, "ref_mode": cfg.ref_mode, "seed": cfg.seed, "ieee": cfg.tol.wants_ieee_float32, "threads": ctx.threads,
               "inputs_on": cfg.inputs_on}  # fmt: skip
    return memo_path(cfg.lock_dir, device_key, Path(ctx.spec.problem_path).read_text(), shaping)


def memo_path(lock_dir: str, device_key: str, problem_text: str, shaping: dict[str, Any]) -> Path:
    """Where one problem's footprint on one device is kept."""
    text = json.dumps([VERSION, problem_text, torch.__version__, shaping], sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:32]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device_key)
    return Path(lock_dir) / f"{safe}.footprints" / f"{digest}.json"


def recall(path: Path, on_gpu: bool) -> Remembered | None:
    """The footprint kept at ``path``; None when there is none, it cannot be read, or it holds what no measurement gives
    (a floor outside (0, PROBE_FLOOR_MAX_S], negative bytes): it is measured again. Without bwrap the lock folder is not
    hidden from candidates (docs/judge.md), and a floor of 0 or of seconds would fail or blind every later judge's
    wait for a quiet GPU."""
    try:
        data = json.loads(path.read_text())
        fp = Footprint(on_gpu, (int(data["io_bytes"][0]), int(data["io_bytes"][1])), int(data["ref_peak_bytes"]), float(data["ref_ms"]))
        quiet_s = None if data["quiet_s"] is None else float(data["quiet_s"])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    if min(*fp.io_bytes, fp.ref_peak_bytes) < 0 or not fp.ref_ms > 0 or (quiet_s is None) == on_gpu:
        return None
    if quiet_s is not None and not 0 < quiet_s <= PROBE_FLOOR_MAX_S:
        return None
    return Remembered(fp, quiet_s)


def remember(path: Path, fp: Footprint, quiet_s: float | None) -> None:
    """Keep a footprint measured holding the device alone (written whole: a reader never sees half of it)."""
    data = {"io_bytes": list(fp.io_bytes), "ref_peak_bytes": fp.ref_peak_bytes, "ref_ms": fp.ref_ms, "quiet_s": quiet_s}
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(f".{os.getpid()}.part")
    part.write_text(json.dumps(data))
    os.replace(part, path)
