"""What the controller hands one supervisor, and reads back of it: typed, JSON on disk, no torch.

The supervisor's work folder (spec, status, logs, result) lies where no runner can see it
(:mod:`pytest_kernelbench.judge.sandbox` hides it): everything here is written by trusted code.
"""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path

from ..config import EvalConfig


@dataclasses.dataclass
class Assignment:
    problem_path: str
    candidate_path: str
    work: str
    result_path: str
    status_path: str
    config: EvalConfig
    build_only: bool = False  # only the candidate's build step (the build pool)
    build_rank: int = 0  # builds the pool queued ahead of this one (runner.build_nice)
    parent_pid: int = 0  # the supervisor stops when this process is gone

    def write(self, path: Path) -> None:
        data = dataclasses.asdict(self)
        data["config"] = self.config.to_dict()
        path.write_text(json.dumps(data))

    @classmethod
    def read(cls, path: Path) -> Assignment:
        data = json.loads(path.read_text())
        data["config"] = EvalConfig(**data["config"])
        return cls(**data)


def read_tail(path: Path, limit: int) -> str:
    """The last ``limit`` bytes of a log, saying so when it was longer."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            if size > limit:
                fh.seek(size - limit)
            data = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return f"[log truncated: last {limit} of {size} bytes]\n" + data if size > limit else data


def describe_exit(returncode: int | None) -> str:
    """How a process ended, as Popen reports it (negative: a signal): 'was killed by SIGSEGV', 'exited with code 3'."""
    if returncode is None:
        return "ended (exit status unknown)"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"
