"""The search's settings: :class:`SearchConfig` (checked and normalised by ``validated``, saved
without the API key by ``public``) and the LLM it names (:func:`make_search_llm`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from kbagent import prompts, strategies
from kbagent import scripted as _scripted  # noqa: F401 - registers scripted/reference
from kbagent.llm import LLM, LLMSettings, make_llm


@dataclasses.dataclass
class SearchConfig:
    model: str = ""  # litellm model string, or scripted/<name>
    num_samples: int = 10  # ideas in the brainstorm, and samples per phase
    num_phases: int = 3  # phase 0 (one candidate per idea) plus improve phases
    max_fix_attempts: int = 2  # repair calls per failing sample
    num_workers: int = 4  # LLM calls in flight
    dry_run: bool = False  # the whole loop without evaluating anything
    query_budget: int | None = None  # at most this many LLM calls (replayed ones included)
    temperature: float = 0.7
    max_tokens: int = 8192
    api_base: str | None = None
    api_key: str | None = dataclasses.field(default=None, repr=False)  # never saved or logged
    strategy: str = strategies.DEFAULT_STRATEGY
    num_parents: int = 4  # parents per improve phase (PIKE: 4, samples split 3/3/2/2 for 10)
    language: str | None = None  # cuda | triton | cpp; None: cuda on GPU, cpp on CPU
    eval_jobs: int = 0  # evaluations at once; 0: half the CPU cores, 1..8
    max_cost_usd: float | None = None  # stop starting LLM calls once this search has spent this much
    price_in: float | None = None  # USD per million prompt tokens (with price_out: instead of litellm's price)
    price_out: float | None = None  # USD per million completion tokens
    elitism: bool = True  # the best-ever candidate is always a parent
    seed: int = 0  # parent selection
    llm_timeout: float = 600.0  # seconds per LLM request
    all_gpus: bool = True  # on CUDA, spread evaluations over every visible GPU (each times under its own lock)

    def validated(self, device: str) -> SearchConfig:
        """A copy with names normalised (strategy, language) and every value checked; ValueError
        with a one-line message otherwise."""
        if not self.model:
            raise ValueError("--model is required (a litellm model such as openai/gpt-4o, or scripted/reference)")
        for name, low in (("num_samples", 1), ("num_phases", 1), ("max_fix_attempts", 0), ("num_workers", 1), ("num_parents", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise ValueError(f"--{name.replace('_', '-')} {value}: must be an integer >= {low}")
        if self.eval_jobs < 0:
            raise ValueError(f"--eval-jobs {self.eval_jobs}: must be >= 0 (0: automatic)")
        if self.query_budget is not None and self.query_budget < 1:
            raise ValueError(f"--query-budget {self.query_budget}: must be >= 1")
        if self.max_cost_usd is not None and self.max_cost_usd <= 0:
            raise ValueError(f"--max-cost {self.max_cost_usd:g}: must be a positive number of dollars")
        if (self.price_in is None) != (self.price_out is None):
            raise ValueError("--price-in and --price-out go together (USD per million prompt and completion tokens)")
        for name in ("price_in", "price_out"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"--{name.replace('_', '-')} {value:g}: must be >= 0 (USD per million tokens)")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"--temperature {self.temperature:g}: must be between 0 and 2")
        if self.max_tokens < 1:
            raise ValueError(f"--max-tokens {self.max_tokens}: must be >= 1")
        strategy = strategies.normalize_strategy(self.strategy)
        language = prompts.normalize_language(self.language, "cuda" if device == "cpu-check" else device)
        if language in ("cuda", "triton") and device not in ("cuda", "cpu-check") and not self.dry_run:
            raise ValueError(f"--language {language} needs --device cuda, or cpu-check without a GPU (on the CPU use --language cpp)")
        return dataclasses.replace(self, strategy=strategy, language=language)

    def llm_settings(self) -> LLMSettings:
        return LLMSettings(
            model=self.model,
            api_base=self.api_base,
            api_key=self.api_key,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            timeout=self.llm_timeout,
            price_in=self.price_in,
            price_out=self.price_out,
        )

    def public(self) -> dict[str, Any]:
        """The settings as they may be saved: everything but the key."""
        data = dataclasses.asdict(self)
        data["api_key"] = "***" if self.api_key else None
        return data

    @classmethod
    def from_public(cls, data: dict[str, Any], **overrides: Any) -> SearchConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields and k != "api_key"}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def make_search_llm(config: SearchConfig) -> LLM:
    """The LLM for ``config.model`` (scripted models registered)."""
    return make_llm(config.llm_settings())
