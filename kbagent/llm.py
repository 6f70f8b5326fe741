"""Every LLM call kbagent makes goes through here (litellm), with retries, usage and cost.

Interface shared by the search (``kbagent.search``) and the tests:

* :class:`LLMSettings` - model string and call knobs (litellm model names: ``gemini/...``,
  ``openai/...``, ``anthropic/...``; any OpenAI-compatible server through ``api_base``).
* :class:`LLMReply` - one finished call: text, finish reason, tokens, cost, or the error that
  made it unusable. A reply never carries the API key.
* :class:`LLM` protocol - ``async complete(messages) -> LLMReply``; never raises for API
  faults (429, 5xx, timeouts, bad replies): they end as ``reply.error`` after the retries.
* :class:`LiteLLMClient` - the real one (``litellm.acompletion``).
* :class:`ScriptedLLM` - answers from a list or a function, for tests and dry runs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol

Messages = list[dict[str, str]]


@dataclasses.dataclass
class LLMSettings:
    model: str
    api_base: str | None = None
    api_key: str | None = None  # never written to any file or log
    temperature: float = 0.7
    max_tokens: int = 8192
    timeout: float = 600.0  # seconds per attempt
    max_retries: int = 4  # retries after the first attempt on 429, 5xx, timeouts, connection errors
    backoff: float = 2.0  # first retry waits this many seconds, doubling (with jitter), capped at 60

    def public(self) -> dict[str, Any]:
        """The settings as they may be saved: everything but the key."""
        data = dataclasses.asdict(self)
        data["api_key"] = "***" if self.api_key else None
        return data


@dataclasses.dataclass
class LLMReply:
    text: str = ""
    finish_reason: str = ""  # "stop", "length" (truncated), ... as the provider says
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0  # litellm's estimate; 0 when it does not know the model's price
    latency_s: float = 0.0
    attempts: int = 1
    model: str = ""
    error: str | None = None  # set when no usable reply came back; the text is then empty

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMReply:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


class LLM(Protocol):
    settings: LLMSettings

    async def complete(self, messages: Messages) -> LLMReply: ...


class ScriptedLLM:
    """Replies from ``script``: a list of strings (used in order, the last one repeated) or a
    function ``messages -> str``. Counts calls; no network."""

    def __init__(self, script: list[str] | Callable[[Messages], str], model: str = "scripted"):
        self.settings = LLMSettings(model=model)
        self._script = script
        self.calls: list[Messages] = []

    async def complete(self, messages: Messages) -> LLMReply:
        raise NotImplementedError  # filled in by the LLM-layer work


class LiteLLMClient:
    """The real client: ``litellm.acompletion`` with retries and backoff."""

    def __init__(self, settings: LLMSettings):
        self.settings = settings

    async def complete(self, messages: Messages) -> LLMReply:
        raise NotImplementedError  # filled in by the LLM-layer work


def make_llm(settings: LLMSettings) -> LLM:
    """``scripted`` models for tests and dry runs, everything else through litellm."""
    raise NotImplementedError  # filled in by the LLM-layer work
