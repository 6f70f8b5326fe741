"""The JSON report (``--kb-report PATH``): every result plus the run's metadata.

It is rewritten atomically after every result, so a run stopped by Ctrl-C or
SIGKILL keeps everything judged before it stopped.
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
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
    if not device.startswith("cuda"):  # torch's version file alone: importing torch takes seconds, and the judges do
        env.update(_torch_version_file())
        return env
    try:
        import torch

        env["torch"] = torch.__version__
        if torch.version.cuda:
            env["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            index = int(device.partition(":")[2] or 0)
            props = torch.cuda.get_device_properties(index)
            env["gpu"] = props.name
            env["gpu_capability"] = f"{props.major}.{props.minor}"
            env["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
    except ImportError:
        pass
    return env


def _torch_version_file() -> dict[str, str]:
    """torch's version and CUDA version from the ``torch/version.py`` that its installer writes, without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {}
    found: dict[str, Any] = {}
    try:
        path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
        exec(compile(path.read_text(), str(path), "exec"), found)  # noqa: S102 - the installed package's own file
    except (OSError, SyntaxError, ImportError):
        return {}
    versions = {"torch": str(found["__version__"])} if found.get("__version__") else {}
    if found.get("cuda"):
        versions["cuda"] = str(found["cuda"])
    return versions


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


class ReportError(ValueError):
    """A file that is not a readable ``--kb-report``: the message is one line and names the file."""


def load_report(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[EvalResult]]:
    """The report's document and its results; :class:`ReportError` for anything that is not one."""
    hint = "write one with pytest --kb-report PATH"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "not JSON" if isinstance(exc, ValueError) else str(exc)
        raise ReportError(f"{path}: not a --kb-report ({reason}); {hint}") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        found = f"schema {schema!r}" if schema else "JSON without a report schema"
        raise ReportError(f"{path}: not a --kb-report ({found}, expected {SCHEMA!r}); {hint}")
    rows = data.get("results", [])
    try:
        return data, [EvalResult.from_dict(r) for r in rows]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise ReportError(f"{path}: a --kb-report whose results cannot be read ({reason})") from None
