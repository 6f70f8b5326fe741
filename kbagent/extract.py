"""Pull a candidate (``class ModelNew``) and idea lists out of LLM replies.

* :func:`extract_code` - the last fenced code block that defines ``class ModelNew``, or the reason
  there is none. Syntax errors are not judged here: the judge reports them as compile errors, and
  the fix loop gets to see them.
* :func:`extract_ideas` - a brainstorm reply (a JSON list of strings, fenced or not, or a numbered
  or bulleted list) as a list of distinct ideas.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import textwrap
from typing import Any

TRUNCATED_LENGTH = "truncated reply (finish_reason=length)"
TRUNCATED_FENCE = "truncated reply (unclosed code fence)"
NO_CODE_BLOCK = "no code block in the reply"
NO_MODELNEW = "the code block defines no ModelNew"

PYTHON_LANGS = {"", "python", "py", "python3", "py3"}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_MODELNEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)


@dataclasses.dataclass
class Extraction:
    code: str | None
    reason: str  # "" when code was found; else why not (starts with "truncated" for cut-off replies)

    @property
    def ok(self) -> bool:
        return self.code is not None


@dataclasses.dataclass
class _Block:
    lang: str
    text: str
    closed: bool


def _fenced_blocks(text: str) -> list[_Block]:
    """Markdown fenced blocks (``` or ~~~), in order; a block still open at the end is unclosed."""
    blocks: list[_Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, indent = match["fence"], len(match["indent"].expandtabs())
        lang = (match["info"].split() or [""])[0].lower().lstrip("{.").rstrip("}")
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            close = _FENCE.match(lines[i])
            if close and close["fence"][0] == fence[0] and len(close["fence"]) >= len(fence) and not close["info"]:
                closed = True
                i += 1
                break
            body.append(lines[i])
            i += 1
        if indent:  # a fence indented inside a list item: drop that indentation from its lines
            body = [line[indent:] if line[:indent].strip() == "" else line.lstrip() for line in body]
        blocks.append(_Block(lang=lang, text="\n".join(body).strip("\n") + "\n", closed=closed))
    return blocks


def defines_modelnew(code: str) -> bool:
    return bool(_MODELNEW.search(code))


def extract_code(text: str, finish_reason: str = "", defines: re.Pattern[str] = _MODELNEW, missing: str = NO_MODELNEW) -> Extraction:
    """The last fenced Python block (```python, ```py or a bare ```) that defines ``class ModelNew`` (or what
    ``defines`` matches; ``missing`` is then the reason when no block does);
    a block in another language is taken only when no Python one defines it. A closed block wins
    even in a truncated reply. A reply with no fence at all that parses as Python and defines
    ModelNew is taken whole. Otherwise ``code`` is None and ``reason`` is one of
    TRUNCATED_LENGTH (finish_reason "length"), TRUNCATED_FENCE (a fence never closed),
    NO_CODE_BLOCK or NO_MODELNEW."""
    text = text or ""
    blocks = _fenced_blocks(text)
    closed = [b for b in blocks if b.closed]
    for pick in ([b for b in closed if b.lang in PYTHON_LANGS], closed):
        hits = [b for b in pick if defines.search(b.text)]
        if hits:
            return Extraction(code=hits[-1].text, reason="")
    if finish_reason == "length":
        return Extraction(code=None, reason=TRUNCATED_LENGTH)
    if any(not b.closed for b in blocks):
        return Extraction(code=None, reason=TRUNCATED_FENCE)
    if not blocks:
        if defines.search(text):
            try:
                ast.parse(text)
            except (SyntaxError, ValueError):
                pass
            else:
                return Extraction(code=text.strip("\n") + "\n", reason="")
        return Extraction(code=None, reason=NO_CODE_BLOCK)
    return Extraction(code=None, reason=missing)


# ---------------------------------------------------------------------------------------------
# ideas

_ITEM = re.compile(r"^(?P<indent>[ \t]*)(?:\d{1,3}[.):]|\(\d{1,3}\)|[-*+\u2022])[ \t]+(?P<text>\S.*)$")
_IDEA_KEYS = ("idea", "description", "text", "summary", "title", "name")


def _idea_from_json(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in _IDEA_KEYS:
            value = item.get(key)
            if isinstance(value, str) and value.strip():
                return value
        strings = [v for v in item.values() if isinstance(v, str) and v.strip()]
        return ": ".join(strings) if strings else None
    return None


def _json_ideas(text: str) -> list[str] | None:
    candidates = [b.text for b in _fenced_blocks(text) if b.lang in ("json", "")]
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    candidates.append(text)
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else None
        if isinstance(data, list):
            ideas = [idea for idea in (_idea_from_json(x) for x in data) if idea is not None]
            if ideas:
                return ideas
    return None


def _list_ideas(text: str) -> list[str]:
    lines = textwrap.dedent(text.replace("\t", "    ")).splitlines()
    items = [(i, _ITEM.match(line)) for i, line in enumerate(lines)]
    items = [(i, m) for i, m in items if m]
    if not items:
        return []
    top = min(len(m["indent"]) for _, m in items)
    ideas: list[list[str]] = []
    current: list[str] | None = None
    after_blank = False
    for line in lines:
        match = _ITEM.match(line)
        stripped = line.strip()
        if match and len(match["indent"]) == top:
            current = [match["text"].strip()]
            ideas.append(current)
        elif not stripped:
            after_blank = True
            continue
        elif current is not None:
            indent = len(line) - len(line.lstrip())
            if stripped.startswith(("#", "```", "~~~")):
                current = None  # a heading or a code block ends the list
            elif indent > top or match or not after_blank:
                current.append(stripped)  # continuation lines and nested items belong to the idea above
            else:
                current = None  # unindented prose after a blank line ends the list
        after_blank = False
    return [" ".join(parts) for parts in ideas]


def _clean(idea: str) -> str:
    return " ".join(idea.split())


def extract_ideas(text: str, limit: int) -> list[str]:
    """Up to ``limit`` distinct, non-empty ideas from a brainstorm reply: a JSON list of strings
    (or of objects with an "idea"/"description"/... field; bare or in a ```json fence), else the
    items of a numbered or bulleted list (indented lines and nested bullets join their item).
    Whitespace is collapsed; duplicates (ignoring case) are dropped, first one kept."""
    if limit <= 0 or not text:
        return []
    raw = _json_ideas(text)
    if raw is None:
        raw = _list_ideas(text)
    ideas: list[str] = []
    seen: set[str] = set()
    for idea in raw:
        cleaned = _clean(idea)
        key = cleaned.casefold()
        if not cleaned or key in seen:
            continue
        seen.add(key)
        ideas.append(cleaned)
        if len(ideas) >= limit:
            break
    return ideas
