"""The run folder: every prompt, response, candidate and result of a search, and how a resume finds them.

Layout (``<run>`` is ``--out``)::

    <run>/config.json            problem, search and LLM settings (no API key), eval config
    <run>/problem.py             the reference
    <run>/ideas.json             the brainstorm's ideas
    <run>/nodes/<id>/            one folder per LLM call: ideas, p0-i3, p0-i3-f1, p1-n2, ...
        messages.json  prompt.md   the prompt, as sent and readable
        reply.json     response.md the reply (usage, cost, finish reason, error) and its text
        candidate.py               the code extracted from the reply
        result.json                the judge's EvalResult
        node.json                  the node: parent, lineage, phase, status, reason
    <run>/tree.json              the search tree (all nodes, no code)
    <run>/summary.json           one JSON summary (best, llm_calls, tokens, cost_usd, phases, ...)
    <run>/best.py                the best candidate
    <run>/events.log             one line per finished node

Every file is written atomically (a temporary file renamed over it), so a killed run leaves
either the whole file or none: ``reply.json`` marks a finished LLM call and ``result.json`` a
finished evaluation, and a resume replays both instead of redoing them. Every text passes
through :func:`kbagent.llm.redact` with the API key first: the key never reaches the disk.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from kbagent.llm import LLMReply, Messages, redact
from pytest_kernelbench.result import EvalResult

_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
CONFIG = "config.json"
SUMMARY = "summary.json"
TREE = "tree.json"
BEST = "best.py"


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    value_of = getattr(value, "value", None)  # enums
    if value_of is not None:
        return value_of
    return str(value)


def _finite(data: Any) -> Any:
    """NaN and infinities become null: summary.json stays strict JSON."""
    if isinstance(data, float) and (data != data or data in (float("inf"), float("-inf"))):
        return None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    return data


def render_messages(messages: Messages) -> str:
    """A prompt as Markdown, one section per message."""
    return "\n\n".join(f"<!-- {m.get('role', '?')} -->\n{m.get('content', '')}" for m in messages) + "\n"


class RunFolder:
    def __init__(self, root: Path | str, secret: str | None = None):
        self.root = Path(root)
        self._secret = secret or None

    # --- plumbing ------------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def node_dir(self, node_id: str) -> Path:
        if not _NODE_ID.match(node_id):
            raise ValueError(f"bad node id {node_id!r}")
        return self.root / "nodes" / node_id

    def write_text(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(redact(text, self._secret))
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def write_json(self, path: Path, data: Any) -> None:
        self.write_text(path, json.dumps(_finite(data), indent=1, default=_json_default, allow_nan=False) + "\n")

    @staticmethod
    def read_json(path: Path) -> Any | None:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def is_empty(self) -> bool:
        return not self.root.exists() or not any(self.root.iterdir())

    # --- config --------------------------------------------------------------------------------
    def load_config(self) -> dict[str, Any] | None:
        return self.read_json(self.path(CONFIG))

    def save_config(self, config: dict[str, Any], problem_source: str) -> None:
        self.write_text(self.path("problem.py"), problem_source)
        self.write_json(self.path(CONFIG), config)

    # --- LLM calls -----------------------------------------------------------------------------
    def save_call(self, call_id: str, messages: Messages, reply: LLMReply, seq: int) -> None:
        folder = self.node_dir(call_id)
        self.write_json(folder / "messages.json", messages)
        self.write_text(folder / "prompt.md", render_messages(messages))
        self.write_text(folder / "response.md", reply.text if reply.ok else f"(no usable reply: {reply.error})\n")
        self.write_json(folder / "reply.json", {**reply.to_dict(), "seq": seq, "saved_at": time.time()})  # last: marks the call done

    def saved_call(self, call_id: str) -> tuple[LLMReply, int] | None:
        data = self.read_json(self.node_dir(call_id) / "reply.json")
        if not isinstance(data, dict):
            return None
        return LLMReply.from_dict(data), int(data.get("seq", 0))

    def max_seq(self) -> int:
        best = 0
        for path in self.root.glob("nodes/*/reply.json"):
            data = self.read_json(path)
            if isinstance(data, dict):
                best = max(best, int(data.get("seq", 0)))
        return best

    # --- candidates and results ----------------------------------------------------------------
    def candidate_path(self, node_id: str) -> Path:
        return self.node_dir(node_id) / "candidate.py"

    def save_candidate(self, node_id: str, code: str) -> Path:
        path = self.candidate_path(node_id)
        self.write_text(path, code)
        return path

    def save_result(self, node_id: str, result: EvalResult) -> None:
        self.write_json(self.node_dir(node_id) / "result.json", result.to_dict())

    def saved_result(self, node_id: str) -> EvalResult | None:
        data = self.read_json(self.node_dir(node_id) / "result.json")
        if not isinstance(data, dict):
            return None
        try:
            return EvalResult.from_dict(data)
        except (KeyError, TypeError, ValueError):
            return None

    def save_node(self, node: dict[str, Any]) -> None:
        self.write_json(self.node_dir(node["id"]) / "node.json", node)

    # --- whole-run files -----------------------------------------------------------------------
    def save_ideas(self, ideas: list[str], reason: str) -> None:
        self.write_json(self.path("ideas.json"), {"ideas": ideas, "reason": reason})

    def save_tree(self, nodes: list[dict[str, Any]]) -> None:
        self.write_json(self.path(TREE), {"nodes": nodes})

    def save_summary(self, summary: dict[str, Any]) -> None:
        self.write_json(self.path(SUMMARY), summary)

    def save_best(self, code: str) -> Path:
        path = self.path(BEST)
        self.write_text(path, code)
        return path

    def append_event(self, line: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with self.path("events.log").open("a", encoding="utf-8") as fh:
            fh.write(redact(f"{time.strftime('%H:%M:%S')} {line}", self._secret).rstrip("\n") + "\n")


def load_summary(run_dir: Path) -> dict[str, Any] | None:
    return RunFolder.read_json(Path(run_dir) / SUMMARY)


def load_tree(run_dir: Path) -> list[dict[str, Any]]:
    data = RunFolder.read_json(Path(run_dir) / TREE)
    return list(data.get("nodes", [])) if isinstance(data, dict) else []


def find_runs(folder: Path) -> list[Path]:
    """The search run folders at or under ``folder`` (those with a summary.json), sorted."""
    folder = Path(folder)
    if (folder / SUMMARY).is_file():
        return [folder]
    return sorted(p.parent for p in folder.rglob(SUMMARY))
