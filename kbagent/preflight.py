"""Checks made before the first LLM call: a run that cannot work stops at once, with one line that
names the fix, instead of retrying every call of every phase.

* provider: litellm must know where to send the model (``litellm.get_llm_provider``);
* credentials: ``litellm.validate_environment`` (key variables, Azure's base and version, ...),
  counting ``--api-key`` and ``--api-base``;
* ``--api-base``: one GET of ``<base>/models`` (:data:`CONNECT_TIMEOUT_S`): something must answer;
  401/403 is a refused key; a model list without the model means an unknown model;
* one real request of the kind the search makes: a chat completion of one token, through litellm's
  client with the run's settings, no retries (:data:`PROBE_TIMEOUT_S`); any failure stops the run
  (a server that answers 404 to everything, a refused key, a model not found, a rate limit);
* price: a dollar cap needs a price per token, litellm's or ``--price-in``/``--price-out``.

Scripted models need none of this. Every check raises :class:`SetupError` (a ValueError) with a
one-line message; the API key never appears in it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import json
import urllib.error
import urllib.request
from typing import Any

from kbagent.llm import LiteLLMClient, LLMSettings, _litellm, one_line, redact

CONNECT_TIMEOUT_S = 5.0
PROBE_TIMEOUT_S = 60.0
PROBE_MESSAGES = [{"role": "user", "content": "Reply with the single word OK."}]
EXAMPLES = "e.g. openai/gpt-4o, gemini/gemini-2.5-pro, anthropic/claude-sonnet-4-5"
KEY_HINT = "pass --api-key KEY (or env KBAGENT_API_KEY)"


class SetupError(ValueError):
    """The model, its credentials or its endpoint cannot work: one line naming the fix."""


def check_llm(settings: LLMSettings) -> None:
    """Raise :class:`SetupError` unless ``settings`` can plausibly make a call (see the module doc)."""
    if settings.scripted:
        return
    try:
        litellm = _litellm()
    except ImportError:
        raise SetupError(f"--model {settings.model}: litellm is not installed here; pip install 'pytest-kernelbench[agent]' "
                         "(or a scripted/ model, which needs none)") from None  # fmt: skip
    provider, name = _provider(litellm, settings)
    _credentials(litellm, settings, provider)
    similar = ""
    if settings.api_base:
        _endpoint(settings, provider, name)
    elif not _listed(litellm, settings.model):
        similar = _similar(litellm, provider, name)
    _probe(settings, similar)


def check_cost_cap(settings: LLMSettings, flag: str, cap: float | None) -> None:
    """A dollar cap on a model without a price would count every call as $0 and never stop anything."""
    if cap is None or settings.scripted or settings.priced_cost(0, 0) is not None:
        return
    if not has_litellm_price(settings.model):
        raise SetupError(
            f"{flag} {cap:g}: litellm has no price for {settings.model}, so every call would count as $0 and the cap "
            "would never stop anything; pass --price-in USD --price-out USD (per million tokens)"
        )


def has_litellm_price(model: str) -> bool:
    try:
        info = _litellm().get_model_info(model)
    except Exception:  # not mapped
        return False
    return info.get("input_cost_per_token") is not None and info.get("output_cost_per_token") is not None


def _provider(litellm: Any, s: LLMSettings) -> tuple[str, str]:
    try:
        name, provider, _, _ = litellm.get_llm_provider(s.model, api_base=s.api_base)
    except Exception:
        prefix = s.model.partition("/")[0] if "/" in s.model else ""
        known = [str(getattr(p, "value", p)) for p in litellm.provider_list]
        close = difflib.get_close_matches(prefix, known, n=1) if prefix else []
        named = f"no provider {prefix!r}" if prefix else "no provider in it"
        named += f" (did you mean {close[0]}?)" if close else ""
        raise SetupError(
            f"--model {s.model}: litellm knows {named}; write PROVIDER/MODEL, {EXAMPLES}, "
            "or openai/NAME with --api-base URL for an OpenAI-compatible server"
        ) from None
    return str(provider), str(name)


def _credentials(litellm: Any, s: LLMSettings, provider: str) -> None:
    found = litellm.validate_environment(model=s.model, api_key=s.api_key, api_base=s.api_base)
    missing = [str(k) for k in found.get("missing_keys") or []]
    if found.get("keys_in_environment") or not missing:
        return
    hint = "; a server that needs no key takes any, e.g. --api-key none" if s.api_base else ""
    raise SetupError(
        f"--model {s.model}: no credentials for {provider}: litellm finds no {' or '.join(missing)} in the environment; "
        f"set it, or {KEY_HINT}{hint}"
    )


def _listed(litellm: Any, model: str) -> bool:
    try:
        litellm.get_model_info(model)
    except Exception:  # litellm's "not mapped"
        return False
    return True


def _endpoint(s: LLMSettings, provider: str, name: str) -> None:
    base = str(s.api_base).rstrip("/")
    headers = {"Authorization": f"Bearer {s.api_key}"} if s.api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{base}/models", headers=headers), timeout=CONNECT_TIMEOUT_S) as resp:
            body = resp.read(2_000_000)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise SetupError(f"--api-base {base}: the server refused the key (HTTP {exc.code} for GET /models); {KEY_HINT}") from None
        return  # it answered: reachable, and it does not list its models
    except (OSError, ValueError) as exc:  # refused, unknown host, timeout, not a URL
        reason = one_line(redact(str(getattr(exc, "reason", exc) or type(exc).__name__), s.api_key), 120)
        fix = "start the server or fix the URL, e.g. http://host:8000/v1"
        raise SetupError(f"--api-base {base}: nothing answers there ({reason}); {fix}") from None
    served = _model_ids(body)
    if served and name not in served:
        shown = ", ".join(served[:8]) + (", ..." if len(served) > 8 else "")
        listing = f"the server at {base} lists no model {name!r} (it lists {shown})"
        raise SetupError(f"--model {s.model}: {listing}; use --model {provider}/{served[0]}")


def _model_ids(body: bytes) -> list[str]:
    """The ids of an OpenAI-style model list (``{"data": [{"id": ...}]}``); [] for anything else."""
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return []
    if not isinstance(data, list):
        return []
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


def _similar(litellm: Any, provider: str, name: str) -> str:
    """The model of ``provider`` that litellm lists whose name is closest to ``name`` ("" if none is close)."""
    listed = {str(m).removeprefix(f"{provider}/"): str(m) for m in litellm.models_by_provider.get(provider, ())}
    close = difflib.get_close_matches(name, list(listed), n=1, cutoff=0.75)
    return f"{provider}/{close[0]}" if close else ""


def _probe(s: LLMSettings, similar: str) -> None:
    """One chat completion of one token, as the search asks them (litellm's client, these settings), no retries."""
    client = LiteLLMClient(dataclasses.replace(s, timeout=min(s.timeout, PROBE_TIMEOUT_S), max_retries=0, max_tokens=1))
    try:
        asyncio.run(client._attempt(PROBE_MESSAGES))
    except Exception as exc:
        reason = one_line(redact(f"{type(exc).__name__}: {exc}", s.api_key), 200)
        where = f" to {s.api_base}" if s.api_base else ""
        raise SetupError(f"--model {s.model}: a one-token test request{where} failed ({reason}); {_fix(exc, s, similar)}") from None


def _fix(exc: Exception, s: LLMSettings, similar: str) -> str:
    """What to do about the test request's failure, by the kind of error litellm raised."""
    kind = type(exc).__name__
    if kind in ("AuthenticationError", "PermissionDeniedError"):
        return f"the key was refused: {KEY_HINT}"
    if kind == "NotFoundError":
        name = f"did you mean {similar}? " if similar else f"check the model's name ({EXAMPLES}) "
        base = "and --api-base (an OpenAI-compatible server's base usually ends in /v1)" if s.api_base else "and the provider"
        return name + base
    if kind == "RateLimitError":
        return "the provider refuses calls now (rate limit or quota): wait, or check the account"
    return "check --model and --api-base, and that the provider or server answers"
