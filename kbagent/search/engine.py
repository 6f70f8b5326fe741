"""The search's loop: the brainstorm, then each phase's samples as concurrent tasks (an LLM call,
its evaluation, its fix chain), a checkpoint of the run folder after every attempt, and
:func:`run_search`, which opens (or resumes) the run folder, runs the phases and re-judges the best."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from kbagent import prompts
from kbagent.budget import SessionBudget
from kbagent.extract import extract_code, extract_ideas
from kbagent.llm import LLM, LLMSettings, Messages
from kbagent.runfolder import RunFolder
from kbagent.search import report
from kbagent.search.calls import Calls
from kbagent.search.config import SearchConfig
from kbagent.search.evaluations import Evaluations, Evaluator
from kbagent.search.nodes import Node, SearchResult, Tree
from kbagent.search.planning import Planner
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.problems import Problem
from pytest_kernelbench.report.summary import capped_mark
from pytest_kernelbench.result import EvalResult


async def _gather_all(coros: Iterable[Coroutine[Any, Any, Any]]) -> list[Any]:
    """gather that cancels the rest when one task fails (and waits for them to stop)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class _Search:
    def __init__(
        self,
        problem: Problem,
        config: SearchConfig,
        eval_config: EvalConfig,
        llm: LLM,
        run: RunFolder,
        evaluator: Evaluator,
        on_event: Callable[[str], None] | None,
        budget: SessionBudget | None = None,
        prebuild: Callable[[Problem, Candidate], Any] | None = None,
    ):
        self.problem = problem
        self.cfg = config
        self.eval_config = eval_config
        self.run = run
        self.on_event = on_event
        language = config.language or "cpp"
        device = eval_config.target_device if language != "cpp" else eval_config.device  # cpu-check: written for the GPU
        self.target = prompts.Target(language, device, eval_config.for_level(problem.level).tol, checked=eval_config.device == "cpu-check",
                                     varied=eval_config.inputs == "varied")
        self.tree = Tree()
        self.calls = Calls(config, llm, run, problem.id, budget)
        self.evals = Evaluations(problem, config, eval_config, run, evaluator, prebuild)
        self.planner = Planner(problem.source, config, self.target, self.tree)
        self.phases_done = 0
        self.started = time.monotonic()

    # --- one attempt, one sample ---------------------------------------------------------------
    async def _attempt(self, node: Node, messages: Messages) -> Node:
        got = await self.calls.call(node.id, messages)
        if got is None:
            node.status, node.reason = "skipped", self.calls.stop_reason or "budget"
            return node
        reply, node.seq, node.replayed = got
        node.usage = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "cost_usd": reply.cost_usd,
            "latency_s": round(reply.latency_s, 3),
            "attempts": reply.attempts,
            "finish_reason": reply.finish_reason,
        }
        self.tree.nodes[node.id] = node
        if not reply.ok:
            node.status, node.reason = "unusable", f"LLM error: {reply.error}"
        else:
            extraction = extract_code(reply.text, reply.finish_reason)
            if not extraction.ok:
                node.status, node.reason = "unusable", extraction.reason
            else:
                node.code = extraction.code
                path = self.run.save_candidate(node.id, node.code or "")
                if self.cfg.dry_run:
                    node.status = "dry_run"
                else:
                    node.result = await self.evals.evaluate(node, path)
                    node.status = "evaluated"
        self.run.save_node(node.to_dict())
        self._report(node)
        self.checkpoint()
        return node

    def _report(self, node: Node) -> None:
        if node.status == "evaluated" and node.result is not None:
            r = node.result
            correct = r.correct and r.speedup is not None
            what = f"correct {r.speedup:.3f}x{capped_mark(r)}" if correct else f"{r.outcome.value} (stage {r.stage or '-'})"
        elif node.status == "dry_run":
            what = "candidate (dry run, not evaluated)"
        else:
            what = f"unusable: {node.reason}"
        self._event(f"{node.id} {what}" + (" [replayed]" if node.replayed else ""))

    def _event(self, line: str) -> None:
        self.run.append_event(line)
        if self.on_event is not None:
            self.on_event(line)

    async def _sample(self, first: Node, messages: Messages) -> Node:
        """One sample and its fix chain; returns its last attempt (``first`` when even that was skipped)."""
        node = await self._attempt(first, messages)
        last_code = node if node.code is not None else None
        attempt = 0
        while not self.cfg.dry_run and attempt < self.cfg.max_fix_attempts:
            if node.status == "skipped" or node.passed or last_code is None or last_code.result is None:
                break  # done, out of budget, or nothing to fix (the first reply had no code)
            attempt += 1
            fix = Node(
                id=f"{first.id}-f{attempt}",
                phase=first.phase,
                index=first.index,
                kind="fix",
                lineage=first.lineage,
                sample=first.id,
                parent=last_code.id,
                attempt=attempt,
                idea=first.idea,
            )
            done = await self._attempt(fix, self.planner.fix_messages(last_code, attempt))
            if done.status == "skipped":
                break
            node = done
            if node.code is not None:
                last_code = node
        if first.status != "skipped":
            self.tree.finals[first.id] = node
        return node

    # --- phases --------------------------------------------------------------------------------
    async def _brainstorm(self) -> None:
        tree = self.tree
        got = await self.calls.call("ideas", self.planner.ideas_messages())
        if got is None:
            tree.ideas_reason = self.calls.stop_reason or "budget"
            return
        reply, seq, replayed = got
        tree.ideas_usage = {
            "seq": seq,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "cost_usd": reply.cost_usd,
            "latency_s": round(reply.latency_s, 3),
        }
        if not reply.ok:
            tree.ideas_reason = f"LLM error: {reply.error}"
        else:
            tree.ideas = extract_ideas(reply.text, self.cfg.num_samples)
            if not tree.ideas:
                tree.ideas_reason = "no ideas in the reply"
        self.run.save_ideas(tree.ideas, tree.ideas_reason)
        line = f"ideas: {len(tree.ideas)}" + (f" ({tree.ideas_reason})" if tree.ideas_reason else "")
        self._event(line + (" [replayed]" if replayed else ""))

    async def run_phases(self) -> None:
        await self._brainstorm()
        for phase in range(self.cfg.num_phases):
            if self.calls.stop_reason:
                break
            samples = self.planner.fresh_samples(0) if phase == 0 else self.planner.improve_samples(phase)
            await _gather_all(self._sample(node, messages) for node, messages in samples)
            if any(node.status != "skipped" for node, _ in samples):
                self.phases_done = phase + 1
            self.checkpoint()

    # --- reporting -----------------------------------------------------------------------------
    def best(self) -> Node | None:
        return report.best_node(self.tree)

    async def rejudge(self, best: Node | None) -> EvalResult | None:
        return await self.evals.rejudge(best)

    def summary(self, finished: bool, best: Node | None, best_path: Path | None, rejudged: EvalResult | None = None) -> dict[str, Any]:
        nodes = list(self.tree.nodes.values())
        finals = list(self.tree.finals.values())
        calls = self.calls
        return {
            "version": 1,
            "problem": report.problem_info(self.problem),
            "model": self.cfg.model,
            "strategy": self.cfg.strategy,
            "language": self.target.language,
            "device": self.eval_config.device_label,
            "dry_run": self.cfg.dry_run,
            "finished": finished,
            "stop_reason": calls.stop_reason or ("completed" if finished else "running"),
            "best": report.best_info(best, best_path, rejudged),
            "llm_calls": calls.llm_calls,
            "llm_calls_replayed": calls.llm_calls_replayed,
            "llm_errors": calls.llm_errors,
            "tokens": {
                "prompt": calls.prompt_tokens,
                "completion": calls.completion_tokens,
                "total": calls.prompt_tokens + calls.completion_tokens,
            },
            "cost_usd": round(calls.cost_usd, 6),
            "ideas": len(self.tree.ideas),
            "ideas_reason": self.tree.ideas_reason,
            "samples": len(finals),
            "failed_samples": sum(1 for n in finals if not n.passed) if not self.cfg.dry_run else 0,
            "unusable": dict(Counter(n.reason for n in nodes if n.status == "unusable")),
            "outcomes": dict(Counter(n.outcome for n in nodes if n.outcome)),
            "evaluations": self.evals.evaluations,
            "evaluations_run": self.evals.evaluations_run,
            "phases_done": self.phases_done,
            "phases": report.phase_rows(self.tree),
            "elapsed_s": round(time.monotonic() - self.started, 3),
        }

    def checkpoint(self, finished: bool = False, rejudged: EvalResult | None = None) -> tuple[Node | None, Path | None]:
        best = self.best()
        best_path = self.run.save_best(best.code) if best is not None and best.code is not None else None
        self.run.save_tree(report.tree_rows(self.tree))
        self.run.save_summary(self.summary(finished, best, best_path, rejudged))
        return best, best_path


def _config_record(problem: Problem, config: SearchConfig, eval_config: EvalConfig, settings: LLMSettings) -> dict[str, Any]:
    return {
        "version": 1,
        "problem": {
            "level": problem.level,
            "problem_id": problem.problem_id,
            "name": problem.name,
            "origin": problem.origin,
            "source_hash": problem.source_hash,
        },
        "search": config.public(),
        "llm": settings.public(),
        "eval": eval_config.public(),
    }


async def run_search(
    problem: Problem,
    search_config: SearchConfig,
    eval_config: EvalConfig,
    llm: LLM,
    run_dir: Path | str,
    evaluator: Evaluator = evaluate,
    on_event: Callable[[str], None] | None = None,
    budget: SessionBudget | None = None,
    rejudge: bool = True,
    prebuild: Callable[[Problem, Candidate], Any] | None = None,
) -> SearchResult:
    """Run (or continue) the search for ``problem`` in ``run_dir``. Calls and evaluations already in
    ``run_dir`` (same node ids) are replayed, not redone. ``budget``: a ledger shared with other
    searches, charged with every call sent; no call starts once its cap is reached. Raises ValueError
    for bad settings or a run folder that holds another problem; candidate and API faults never raise.
    ``rejudge``: judge the best correct candidate once more, fresh, and report that judgement (the
    pytest plugin passes False: its test judges the saved best right after). ``prebuild``: given each
    candidate as soon as it is written (the build pool's ``submit``), before it waits for an evaluation slot."""
    config = search_config.validated(eval_config.device)
    secret = config.api_key or getattr(getattr(llm, "settings", None), "api_key", None)
    run = RunFolder(run_dir, secret=secret)
    saved = run.load_config()
    if saved is not None and saved.get("problem", {}).get("source_hash") != problem.source_hash:
        raise ValueError(f"{run_dir}: this run folder holds a search for another problem ({saved.get('problem', {}).get('name')})")
    settings = getattr(llm, "settings", None) or config.llm_settings()
    record = _config_record(problem, config, eval_config, settings)
    record["created"] = (saved or {}).get("created", time.time())
    record["resumed"] = [*(saved or {}).get("resumed", []), time.time()] if saved is not None else []
    run.save_config(record, problem.source)
    search = _Search(problem, config, eval_config, llm, run, evaluator, on_event, budget, prebuild)
    await search.run_phases()
    rejudged = await search.rejudge(search.best()) if rejudge else None
    best, best_path = search.checkpoint(finished=True, rejudged=rejudged)
    summary = search.summary(True, best, best_path, rejudged)
    return SearchResult(Path(run_dir), summary, list(search.tree.nodes.values()), best, best_path, rejudged)


def run_search_sync(*args: Any, **kwargs: Any) -> SearchResult:
    """:func:`run_search` from synchronous code (the CLI, the pytest plugin)."""
    return asyncio.run(run_search(*args, **kwargs))
