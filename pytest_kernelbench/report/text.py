"""Candidate text made safe to show a person: the one function every human-facing output passes it through.

A verdict's message, a runner's log tail, an error a candidate raised: the candidate writes them, and a terminal obeys
what they hold. An escape sequence can repaint the screen (a green "correct 48.000x" drawn over the real verdict), a
carriage return overwrite a line, a bidirectional override reorder it. :func:`printable` shows each such character
as its escape (``\\x1b``, ``\\r``, ``\\u202e``) instead of sending it; newlines and tabs stay. :func:`markup` does that
and escapes rich markup (``[green]...``) for text printed where rich reads markup.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline (and a carriage return ending a line: harmless), DEL, C1 controls, the bidirectional
# marks, overrides and isolates, lone surrogates (which cannot even be encoded for a terminal)
_UNSAFE = re.compile("\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every control character (but newline and tab) shown as its escape, never sent to the terminal."""
    return _UNSAFE.sub(_shown, text if isinstance(text, str) else str(text))


def markup(text: object) -> str:
    """:func:`printable`, and rich's markup escaped: for candidate text inside a string rich renders as markup."""
    from rich.markup import escape

    return escape(printable(text))
