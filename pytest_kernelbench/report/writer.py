"""The JSON report (``--kb-report PATH``): every result plus the run's metadata.

It is rewritten atomically after every result, so a run stopped by Ctrl-C or
SIGKILL keeps everything judged before it stopped.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from pathlib import Path
from typing import Any

from ..result import EvalResult
from .summary import summarize

SCHEMA = "pytest-kernelbench/report/1"


def environment(device: str) -> dict[str, Any]:
    """Device and versions of the process that drives the run (workers add their own per result)."""
    env: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(), "device": device}
    try:
        import torch

        env["torch"] = torch.__version__
        if torch.version.cuda:
            env["cuda"] = torch.version.cuda
        if device.startswith("cuda") and torch.cuda.is_available():
            index = int(device.partition(":")[2] or 0)
            props = torch.cuda.get_device_properties(index)
            env["gpu"] = props.name
            env["gpu_capability"] = f"{props.major}.{props.minor}"
            env["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
    except ImportError:
        pass
    return env


class ReportWriter:
    def __init__(self, path: str | os.PathLike[str] | None, options: dict[str, Any], env: dict[str, Any]):
        self.path = Path(path) if path else None
        self.options = options
        self.env = env
        self.results: list[EvalResult] = []
        self.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.finished = False

    def add(self, result: EvalResult) -> None:
        self.results.append(result)
        self.write()

    def document(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "created": self.created,
            "finished": self.finished,
            "options": self.options,
            "environment": self.env,
            "summary": summarize(self.results),
            "results": [r.to_dict() for r in self.results],
        }

    def write(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.document(), indent=1))
        os.replace(tmp, self.path)

    def close(self) -> None:
        self.finished = True
        self.write()


def load_report(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[EvalResult]]:
    data = json.loads(Path(path).read_text())
    return data, [EvalResult.from_dict(r) for r in data.get("results", [])]
