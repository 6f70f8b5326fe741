"""kbagent's pytest plugin: with ``--model``, each KernelBench item runs an agent search first.

The fixture that supplies an item's candidate asks the hook ``pytest_kernelbench_candidate``;
this plugin answers it by running :func:`kbagent.search.run_search` for the item's problem with
the session's eval config, saving the best candidate to ``<out>/best/level<L>/<name>.<device>.py``
(a solutions folder: re-check later with ``--solutions <out>/best``) and returning it; the item
then judges it as in eval-only runs. Each item's run folder is ``<out>/<item id>``: running the
same command with the same ``--out`` again continues the searches where they stopped.

Before any item runs, the controller checks the model (:mod:`kbagent.preflight`): no key, an
unknown provider or model, an unreachable ``--api-base`` or a dollar cap without a price is one
usage error. ``--max-cost`` caps the whole run folder through the ledger ``<out>/llm-spend.jsonl``
(:mod:`kbagent.budget`), which xdist workers share; ``--max-cost-per-task`` caps each item. An item
that the session cap stopped before it had a candidate is skipped, not failed.

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
    ("--max-cost-per-task", "max_cost_usd", float, "stop starting an item's LLM calls once it has cost this many dollars (default: none)"),
    ("--price-in", "price_in", float, "USD per million prompt tokens, for a model litellm has no price for (with --price-out)"),
    ("--price-out", "price_out", float, "USD per million completion tokens (with --price-in)"),
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
        "--max-cost",
        dest="kbagent_max_cost",
        type=float,
        default=None,
        help="stop starting LLM calls once the whole run has cost this many dollars: all items, all xdist workers, "
        "and earlier sessions with the same --out (default: none)",
    )
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
        _check_options(config, session.eval_config.device)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not config.getoption("kbagent_out") and not hasattr(config, "workerinput"):
        # Chosen once by the controller; xdist workers get the controller's options.
        config.option.kbagent_out = default_out(sorted({p.level for p in session.problems}))


def _check_options(config: pytest.Config, device: str) -> None:
    """Every search option, then (once, on the controller) the model: a ValueError with one line."""
    search = search_config(config)
    session_cap = config.getoption("kbagent_max_cost")
    for flag, cap in (("--max-cost", session_cap), ("--max-cost-per-task", search.max_cost_usd)):
        if cap is not None and cap <= 0:
            raise ValueError(f"{flag} {cap:g}: must be a positive number of dollars")
    search = search.validated(device)
    if not hasattr(config, "workerinput"):
        _preflight(search, session_cap)


def _preflight(search: Any, session_cap: float | None) -> None:
    """A dollar cap on an unpriced model, no key, an unknown provider or model, an unreachable --api-base, a one-token
    test request refused: a ValueError (one line) before the first item's first call."""
    from kbagent.preflight import check_cost_cap, check_llm
    from kbagent.search import make_search_llm

    settings = make_search_llm(search).settings
    check_cost_cap(settings, "--max-cost", session_cap)
    check_cost_cap(settings, "--max-cost-per-task", search.max_cost_usd)
    check_llm(settings)  # last: its one-token request is the only check that costs anything


def session_budget(config: pytest.Config, out: Path) -> Any:
    """The ledger of every call under ``out``, capped by ``--max-cost`` (see kbagent.budget)."""
    from kbagent.budget import LEDGER_NAME, SessionBudget

    return SessionBudget(out / LEDGER_NAME, config.getoption("kbagent_max_cost"))


def _judges(config: pytest.Config, session: Any) -> tuple[Any, Any]:
    """Where the search's evaluations go, as in eval-only runs: the Ray cluster with ``--ray-address``
    (one task per candidate), else here with extensions built ahead on the build pool (``--build-jobs``)."""
    from pytest_kernelbench.build.pool import Prebuilder, default_build_jobs
    from pytest_kernelbench.judge.controller import evaluate
    from pytest_kernelbench.plugin import prebuilder_key, ray_evaluator

    remote = ray_evaluator(config, session.eval_config)
    if remote is not None:
        return (lambda problem, candidate, _config: remote.result(problem, candidate)), None  # Ray gives the GPU
    jobs = config.getoption("kb_build_jobs", None)
    jobs = default_build_jobs() if jobs is None else jobs
    if not jobs:
        return evaluate, None
    pool = config.stash.get(prebuilder_key, None)
    if pool is None:
        pool = config.stash[prebuilder_key] = Prebuilder(session.eval_config, jobs)  # closed at session finish
    return evaluate, pool.submit


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
    device = session.eval_config.target_device  # --device cpu-check saves <name>.cuda.py: the GPU's judge picks it up
    search = search_config(config)
    budget = session_budget(config, out)
    try:
        evaluator, prebuild = _judges(config, session)
        result = run_search_sync(problem, search, session.eval_config, make_search_llm(search), run_dir, budget=budget,
                                 rejudge=False, evaluator=evaluator, prebuild=prebuild)  # this test judges the saved best afresh below
    except ValueError as exc:
        pytest.fail(f"kbagent: {exc}", pytrace=False)
    summary = result.summary
    props = request.node.user_properties
    props.append(("kbagent_run", str(run_dir)))
    props.append(("kbagent_llm_calls", summary["llm_calls"]))
    props.append(("kbagent_tokens", summary["tokens"]["total"]))
    props.append(("kbagent_cost_usd", summary["cost_usd"]))
    if summary.get("best"):  # the search's own (noisy, best-of-many) figure; the item's result is the fresh one
        props.append(("kbagent_search_speedup", summary["best"].get("search_speedup")))
    candidate = result.best_candidate()
    session_stop = budget.stop_reason() if candidate is None else None
    if session_stop:  # not attempted, or cut short, for want of money: not a failure of the search
        pytest.skip(f"kbagent: no candidate for {problem.id}: {session_stop} (run folder {run_dir})")
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
        budget = session_budget(config, Path(out))
        cap = f" of a --max-cost of ${budget.cap_usd:g}" if budget.cap_usd is not None else ""
        terminalreporter.write_line(
            f"kbagent: run folders in {out}; best candidates in {Path(out) / 'best'} "
            f"(re-check: --solutions {Path(out) / 'best'}; plots: kbagent report {out})"
        )
        terminalreporter.write_line(f"kbagent: ${budget.spent():.4f} spent on LLM calls under {out}{cap} (ledger {budget.path})")
