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
    """The report of one run. ``pending``: the selected items (:meth:`select`) that have not run yet, neither judged
    nor skipped nor failed outside the judge; ``finished`` is true once the run ended (:meth:`close`) with none."""

    def __init__(self, path: str | os.PathLike[str] | None, options: dict[str, Any], env: dict[str, Any]):
        self.path = Path(path) if path else None
        self.options = options
        self.env = env
        self.results: list[EvalResult] = []
        self.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.closed = False
        self.selected: list[str] = []
        self.skipped: dict[str, str] = {}  # item id -> why (no candidate, too big for this machine, ...)
        self.errors: set[str] = set()  # items that failed without a result (a fixture's error)
        self.resumed = 0  # results kept from the report this run resumes (--kb-resume)

    def add(self, result: EvalResult) -> None:
        self.results.append(result)
        self.write()

    def keep(self, results: list[EvalResult]) -> None:
        """Results of an earlier run of this report, kept as they are (``--kb-resume``)."""
        self.results[:0] = results
        self.resumed = len(results)

    def select(self, ids: list[str]) -> None:
        """The items this run selected, in order."""
        self.selected = list(dict.fromkeys(ids))
        self.write()

    def skip(self, item: str, why: str) -> None:
        self.skipped[item] = why
        self.write()

    def error(self, item: str) -> None:
        self.errors.add(item)
        self.write()

    @property
    def pending(self) -> list[str]:
        done = {r.problem for r in self.results} | set(self.skipped) | self.errors
        return [item for item in self.selected if item not in done]

    @property
    def finished(self) -> bool:
        return self.closed and not self.pending

    def document(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "created": self.created,
            "finished": self.finished,
            "pending": self.pending,
            "skipped": self.skipped,
            **({"resumed": self.resumed} if self.resumed else {}),
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
        self.closed = True
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
