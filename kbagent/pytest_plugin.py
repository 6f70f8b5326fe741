"""kbagent's pytest plugin: with ``--model``, each KernelBench item runs an agent search first.

The fixture that supplies an item's candidate asks the hook ``pytest_kernelbench_candidate``;
this plugin answers it by running :func:`kbagent.search.run_search` for the item's problem with
the session's eval config, saving the best candidate to ``<out>/best/level<L>/<name>.<device>.py``
(a solutions folder: re-check later with ``--solutions <out>/best``) and returning it; the item
then judges it as in eval-only runs. Each item's run folder is ``<out>/<item id>``: running the
same command with the same ``--out`` again continues the searches where they stopped.

This module is loaded by every pytest run (on GPU machines without litellm too), so it imports
nothing heavy: the search, litellm and torch are imported only when ``--model`` is given.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

API_KEY_ENV = "KBAGENT_API_KEY"

# option name, dest, type, help; defaults come from kbagent.search.SearchConfig
_VALUE_OPTIONS: list[tuple[str, str, Any, str]] = [
    ("--num-samples", "num_samples", int, "ideas, and samples per phase (default 10)"),
    ("--num-phases", "num_phases", int, "phases, phase 0 included (default 3)"),
    ("--max-fix-attempts", "max_fix_attempts", int, "repair calls per failing sample (default 2)"),
    ("--num-workers", "num_workers", int, "LLM calls in flight (default 4)"),
    ("--query-budget", "query_budget", int, "stop after this many LLM calls per item (default: none)"),
    ("--max-cost", "max_cost_usd", float, "stop starting LLM calls once an item has cost this many dollars (default: none)"),
    ("--temperature", "temperature", float, "sampling temperature (default 0.7)"),
    ("--max-tokens", "max_tokens", int, "max tokens per reply (default 8192)"),
    ("--api-base", "api_base", str, "OpenAI-compatible base URL (vLLM, a gateway), e.g. http://host:8000/v1"),
    ("--strategy", "strategy", str, "parent selection: lineage-topk (PIKE, default), elite-diverse, tournament, roulette"),
    ("--num-parents", "num_parents", int, "parents per improve phase (default 4)"),
    ("--language", "language", str, "cuda, triton or cpp (default: cuda on GPU, cpp on CPU)"),
    ("--eval-jobs", "eval_jobs", int, "evaluations at once (default: half the cores, at most 8)"),
    ("--search-seed", "seed", int, "seed of parent selection (default 0)"),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kbagent", "kbagent: an LLM agent search per item (with --model)")
    group.addoption(
        "--model",
        dest="kb_model",
        help="run an agent search per item with this litellm model (gemini/..., openai/..., anthropic/...) "
        "or scripted/reference (no key, no network), then judge its best candidate",
    )
    for flag, dest, kind, text in _VALUE_OPTIONS:
        group.addoption(flag, dest=f"kbagent_{dest}", type=kind, default=None, help=text)
    group.addoption(
        "--api-key",
        dest="kbagent_api_key",
        default=None,
        help=f"API key for the model (default: env {API_KEY_ENV}, else the provider's own env variable); never saved or printed",
    )
    group.addoption(
        "--dry-run", dest="kbagent_dry_run", action="store_true", help="run the search loop without evaluating; items are skipped"
    )
    group.addoption("--no-elitism", dest="kbagent_no_elitism", action="store_true", help="do not keep the best-ever candidate as a parent")
    group.addoption("--out", dest="kbagent_out", default=None, help="run folder (default runs/<timestamp>-<level>)")


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("kb_model", None))


def search_config(config: pytest.Config) -> Any:
    """The SearchConfig the options ask for (not yet validated)."""
    from kbagent.search import SearchConfig

    values = {dest: config.getoption(f"kbagent_{dest}") for _, dest, _, _ in _VALUE_OPTIONS}
    values = {k: v for k, v in values.items() if v is not None}
    return SearchConfig(
        model=config.getoption("kb_model"),
        api_key=config.getoption("kbagent_api_key") or os.environ.get(API_KEY_ENV) or None,
        dry_run=bool(config.getoption("kbagent_dry_run")),
        elitism=not config.getoption("kbagent_no_elitism"),
        # Under xdist each worker already has its own GPU (gwN -> cuda:N); alone, use them all.
        all_gpus=not os.environ.get("PYTEST_XDIST_WORKER"),
        **values,
    )


def default_out(levels: list[str]) -> str:
    return os.path.join("runs", f"{time.strftime('%Y%m%d-%H%M%S')}-{'-'.join(levels) or 'run'}")


def pytest_configure(config: pytest.Config) -> None:
    if not _enabled(config):
        return
    from pytest_kernelbench.plugin.session import session_key

    session = config.stash.get(session_key, None)
    if session is None:
        return
    try:
        search_config(config).validated(session.eval_config.device)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not config.getoption("kbagent_out") and not hasattr(config, "workerinput"):
        # Chosen once by the controller; xdist workers get the controller's options.
        config.option.kbagent_out = default_out(sorted({p.level for p in session.problems}))


def _no_candidate_reason(summary: dict[str, Any]) -> str:
    unusable = summary.get("unusable") or {}
    parts = []
    if unusable:
        parts.append("unusable replies: " + "; ".join(f"{reason} (x{count})" for reason, count in unusable.items()))
    if summary.get("ideas_reason"):
        parts.append(f"brainstorm: {summary['ideas_reason']}")
    if summary.get("stop_reason") not in (None, "completed"):
        parts.append(f"stopped: {summary['stop_reason']}")
    return "; ".join(parts) or f"{summary.get('llm_calls', 0)} LLM calls gave no code"


def best_path(out: Path, problem: Any, device: str) -> Path:
    return out / "best" / f"level{problem.level}" / f"{problem.name}.{device}.py"


def pytest_kernelbench_candidate(problem: Any, session: Any, request: pytest.FixtureRequest) -> Any:
    config = request.config
    if not _enabled(config):
        return None
    from kbagent.search import make_search_llm, run_search_sync
    from pytest_kernelbench.candidates import Candidate

    out = Path(config.getoption("kbagent_out") or default_out([problem.level]))
    run_dir = out / problem.id
    device = session.eval_config.device
    search = search_config(config)
    try:
        result = run_search_sync(problem, search, session.eval_config, make_search_llm(search), run_dir)
    except ValueError as exc:
        pytest.fail(f"kbagent: {exc}", pytrace=False)
    summary = result.summary
    props = request.node.user_properties
    props.append(("kbagent_run", str(run_dir)))
    props.append(("kbagent_llm_calls", summary["llm_calls"]))
    props.append(("kbagent_tokens", summary["tokens"]["total"]))
    props.append(("kbagent_cost_usd", summary["cost_usd"]))
    candidate = result.best_candidate()
    if candidate is None:
        pytest.fail(f"kbagent: no candidate for {problem.id}: {_no_candidate_reason(summary)} (run folder {run_dir})", pytrace=False)
    path = best_path(out, problem, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(candidate.source, encoding="utf-8")
    if search.dry_run:
        pytest.skip(f"--dry-run: searched without evaluating ({summary['llm_calls']} LLM calls); best candidate saved to {path}")
    return Candidate(candidate.source, str(path), f"kbagent {result.best.id if result.best else ''}".strip())


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _enabled(config) or hasattr(config, "workerinput"):
        return
    out = config.getoption("kbagent_out")
    if out and Path(out).is_dir():
        terminalreporter.write_line(
            f"kbagent: run folders in {out}; best candidates in {Path(out) / 'best'} "
            f"(re-check: --solutions {Path(out) / 'best'}; plots: kbagent report {out})"
        )
