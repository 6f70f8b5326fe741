"""The agent search: PIKE's branching search with global elitism, budgets, parallel calls and resume.

One brainstorm call gives up to ``num_samples`` ideas; phase 0 writes one candidate per idea; a
failing candidate gets up to ``max_fix_attempts`` repair calls that see its error; between
phases a strategy (:mod:`kbagent.strategies`) picks parents and splits the next phase's
``num_samples`` over them; phases 1..n ask to improve a parent, told its runtime, speedup and
what failed before in its line. ``num_phases`` counts phase 0.

Concurrency: every sample of a phase runs as its own task: its LLM call (at most
``num_workers`` in flight), then its evaluation in a thread (at most ``eval_jobs`` at once; the
engine takes the per-device lock for timing, so compiles overlap and timings do not), then its
fixes. LLM latency, compilation and timing overlap; phases are barriers.

Node ids are deterministic (``ideas``, ``p0-i3``, ``p0-i3-f1``, ``p1-n2``, ``p1-n2-f1``): a resumed
run finds each finished call and evaluation in the run folder under the same id and replays it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from kbagent import prompts, strategies
from kbagent import scripted as _scripted  # noqa: F401 - registers scripted/reference
from kbagent.budget import SessionBudget
from kbagent.extract import extract_code, extract_ideas
from kbagent.llm import LLM, LLMReply, LLMSettings, Messages, make_llm, one_line
from kbagent.runfolder import RunFolder
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import Problem
from pytest_kernelbench.result import EvalResult

Evaluator = Callable[[Problem, Candidate, EvalConfig], EvalResult]
HISTORY_LINES = 8  # earlier attempts of a line shown to the improve agent
OTHER_IDEAS = 3  # brainstorm ideas from other lines offered to the improve agent


def visible_gpus(eval_config: EvalConfig) -> list[int]:
    """The GPU indices evaluations may use: all visible ones on CUDA, else the configured device."""
    if eval_config.device != "cuda":
        return [eval_config.device_index]
    import torch

    return list(range(torch.cuda.device_count())) or [eval_config.device_index]


def default_eval_jobs() -> int:
    return max(1, min(8, (os.cpu_count() or 2) // 2))


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


@dataclasses.dataclass
class Node:
    """One LLM call that should yield a candidate, and what became of it."""

    id: str
    phase: int
    index: int  # the sample's position in its phase
    kind: str  # "sample" (from an idea), "improve", "fix"
    lineage: str  # the phase-0 sample this line descends from
    sample: str  # the first attempt of this node's sample
    parent: str | None = None  # the node improved or fixed
    attempt: int = 0  # 0 for the sample, k for its k-th fix
    idea: str | None = None
    status: str = "pending"  # evaluated | dry_run | unusable | skipped
    reason: str = ""  # why unusable or skipped
    code: str | None = None
    result: EvalResult | None = None
    seq: int = 0  # order in which LLM replies arrived (the run's call counter)
    usage: dict[str, Any] = dataclasses.field(default_factory=dict)
    replayed: bool = False

    @property
    def order(self) -> int:
        return self.phase * 1_000_000 + self.index * 1_000 + self.attempt

    @property
    def outcome(self) -> str | None:
        return self.result.outcome.value if self.result else None

    @property
    def correct(self) -> bool:
        return self.result is not None and self.result.correct

    @property
    def passed(self) -> bool:
        """Correct, or passed ``--device cpu-check`` (built): nothing for a fix to repair."""
        return self.correct or (self.result is not None and self.result.outcome is Outcome.BUILT)

    @property
    def speedup(self) -> float | None:
        return self.result.speedup if self.correct else None

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "id": self.id,
            "phase": self.phase,
            "kind": self.kind,
            "parent": self.parent,
            "lineage": self.lineage,
            "sample": self.sample,
            "attempt": self.attempt,
            "idea": self.idea,
            "status": self.status,
            "reason": self.reason,
            "outcome": self.outcome,
            "speedup": r.speedup if r else None,
            "reward": r.reward if r else None,
            "stage": r.stage if r else None,
            "ref_ms": r.ref_ms if r else None,
            "new_ms": r.new_ms if r else None,
            "max_abs_diff": r.max_abs_diff if r else None,
            "message": prompts.first_line(r.message) if r else "",
            "seq": self.seq,
            **{k: self.usage.get(k) for k in ("prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "attempts", "finish_reason")},
        }


@dataclasses.dataclass
class SearchResult:
    run_dir: Path
    summary: dict[str, Any]
    nodes: list[Node]
    best: Node | None
    best_path: Path | None
    rejudged: EvalResult | None = None  # the best correct candidate judged again, fresh (what is reported)

    def best_candidate(self) -> Candidate | None:
        if self.best is None or self.best.code is None:
            return None
        return Candidate(self.best.code, str(self.best_path or ""), f"kbagent {self.best.id}")


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


def _rank_reward(result: EvalResult | None) -> float:
    """A result's reward for ranking; a harness error (no verdict, no reward) ranks as an unknown error, and a
    candidate that passed ``--device cpu-check`` (built, untimed) below every correct one and above every failure."""
    if result is None:
        return 0.0
    if result.outcome is Outcome.BUILT:
        return -1.0
    return result.reward if result.reward is not None else -6.0


def _error_result(problem: Problem, eval_config: EvalConfig, candidate: Candidate, exc: Exception) -> EvalResult:
    return EvalResult(
        problem=problem.id,
        level=problem.level,
        problem_id=problem.problem_id,
        outcome=Outcome.UNKNOWN_ERROR,
        message=one_line(f"the evaluator raised {type(exc).__name__}: {exc}"),
        device=eval_config.device_label,
        source_hash=candidate.source_hash,
        candidate_path=candidate.path,
    )


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
        self.budget = budget
        self.prebuild = prebuild
        self.cfg = config
        self.eval_config = eval_config
        self.llm = llm
        self.run = run
        self.evaluator = evaluator
        self.on_event = on_event
        language = config.language or "cpp"
        device = eval_config.target_device if language != "cpp" else eval_config.device  # cpu-check: written for the GPU
        self.target = prompts.Target(language, device, eval_config.for_level(problem.level).tol, checked=eval_config.device == "cpu-check")
        self.nodes: dict[str, Node] = {}
        self.finals: dict[str, Node] = {}  # sample id -> its last attempt
        self.ideas: list[str] = []
        self.ideas_reason = ""
        self.ideas_usage: dict[str, Any] = {}
        self.calls_started = 0  # counts against the query budget
        self.llm_calls = self.llm_calls_replayed = self.llm_errors = 0
        self.prompt_tokens = self.completion_tokens = 0
        self.cost_usd = 0.0
        self.evaluations = self.evaluations_run = 0
        self.stop_reason: str | None = None
        self.phases_done = 0
        self.seq = run.max_seq()
        self.started = time.monotonic()
        self.llm_slots = asyncio.Semaphore(config.num_workers)
        self.eval_slots = asyncio.Semaphore(config.eval_jobs or default_eval_jobs())
        self.gpus = visible_gpus(eval_config) if config.all_gpus else [eval_config.device_index]
        self._next_gpu = 0

    # --- LLM calls -----------------------------------------------------------------------------
    def _budget_stop(self) -> str | None:
        if self.cfg.query_budget is not None and self.calls_started >= self.cfg.query_budget:
            return f"query budget of {self.cfg.query_budget} LLM calls reached"
        return self._cost_stop()

    def _cost_stop(self) -> str | None:
        if self.cfg.max_cost_usd is not None and self.cost_usd >= self.cfg.max_cost_usd:
            return f"cost budget of ${self.cfg.max_cost_usd:g} reached (${self.cost_usd:.4f} spent)"
        return self.budget.stop_reason() if self.budget is not None else None

    def _account(self, reply: LLMReply) -> None:
        self.llm_calls += 1
        self.prompt_tokens += int(reply.prompt_tokens or 0)
        self.completion_tokens += int(reply.completion_tokens or 0)
        self.cost_usd += float(reply.cost_usd or 0.0)
        if not reply.ok:
            self.llm_errors += 1

    async def _call(self, call_id: str, messages: Messages) -> tuple[LLMReply, int, bool] | None:
        """(reply, seq, replayed), or None when a budget forbids the call."""
        saved = self.run.saved_call(call_id)
        if saved is not None:
            reply, seq = saved
            self.calls_started += 1
            self.llm_calls_replayed += 1
            self._account(reply)
            return reply, seq, True
        stop = self._budget_stop()
        if stop:
            self.stop_reason = self.stop_reason or stop
            return None
        self.calls_started += 1
        async with self.llm_slots:
            stop = self._cost_stop()  # spending may have gone on while this call waited for a slot
            if stop:
                self.calls_started -= 1
                self.stop_reason = self.stop_reason or stop
                return None
            reply = await self.llm.complete(messages)
        if self.budget is not None:
            self.budget.record(self.problem.id, call_id, reply.cost_usd)
        self.seq += 1
        self.run.save_call(call_id, messages, reply, self.seq)
        self._account(reply)
        return reply, self.seq, False

    # --- evaluations ---------------------------------------------------------------------------
    async def _evaluate(self, node: Node, path: Path) -> EvalResult:
        saved = self.run.saved_result(node.id)
        if saved is not None:
            self.evaluations += 1
            return saved
        candidate = Candidate(node.code or "", str(path), f"kbagent {node.id}")
        if self.prebuild is not None:  # its extension builds now, on the pool, while it waits for a slot
            self.prebuild(self.problem, candidate)
        async with self.eval_slots:
            eval_config = dataclasses.replace(self.eval_config, profile=True)  # a GPU judge keeps a per-kernel time table for the prompt
            if len(self.gpus) > 1:  # round robin; the per-GPU timing lock keeps each GPU to one timed run
                eval_config = dataclasses.replace(eval_config, device_index=self.gpus[self._next_gpu % len(self.gpus)])
                self._next_gpu += 1
            try:
                result = await asyncio.to_thread(self.evaluator, self.problem, candidate, eval_config)
            except Exception as exc:  # noqa: BLE001 - a broken evaluator is a result, not a lost search
                result = _error_result(self.problem, self.eval_config, candidate, exc)
        self.run.save_result(node.id, result)
        self.evaluations += 1
        self.evaluations_run += 1
        return result

    # --- one attempt, one sample ---------------------------------------------------------------
    async def _attempt(self, node: Node, messages: Messages) -> Node:
        got = await self._call(node.id, messages)
        if got is None:
            node.status, node.reason = "skipped", self.stop_reason or "budget"
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
        self.nodes[node.id] = node
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
                    node.result = await self._evaluate(node, path)
                    node.status = "evaluated"
        self.run.save_node(node.to_dict())
        self._report(node)
        self._checkpoint()
        return node

    def _report(self, node: Node) -> None:
        if node.status == "evaluated" and node.result is not None:
            r = node.result
            what = f"correct {r.speedup:.3f}x" if r.correct and r.speedup is not None else f"{r.outcome.value} (stage {r.stage or '-'})"
        elif node.status == "dry_run":
            what = "candidate (dry run, not evaluated)"
        else:
            what = f"unusable: {node.reason}"
        line = f"{node.id} {what}" + (" [replayed]" if node.replayed else "")
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
            done = await self._attempt(fix, self._fix_messages(last_code, attempt))
            if done.status == "skipped":
                break
            node = done
            if node.code is not None:
                last_code = node
        if first.status != "skipped":
            self.finals[first.id] = node
        return node

    def _fix_messages(self, failing: Node, attempt: int) -> Messages:
        r = failing.result
        assert r is not None
        return prompts.fix_messages(
            self.problem.source,
            failing.code or "",
            outcome=r.outcome.value,
            stage=r.stage,
            message=r.message,
            max_abs_diff=r.max_abs_diff,
            attempt=attempt,
            max_attempts=self.cfg.max_fix_attempts,
            target=self.target,
        )

    # --- phases --------------------------------------------------------------------------------
    async def _brainstorm(self) -> None:
        messages = prompts.ideas_messages(self.problem.source, self.cfg.num_samples, self.target)
        got = await self._call("ideas", messages)
        if got is None:
            self.ideas_reason = self.stop_reason or "budget"
            return
        reply, seq, replayed = got
        self.ideas_usage = {
            "seq": seq,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "cost_usd": reply.cost_usd,
            "latency_s": round(reply.latency_s, 3),
        }
        if not reply.ok:
            self.ideas_reason = f"LLM error: {reply.error}"
        else:
            self.ideas = extract_ideas(reply.text, self.cfg.num_samples)
            if not self.ideas:
                self.ideas_reason = "no ideas in the reply"
        self.run.save_ideas(self.ideas, self.ideas_reason)
        line = f"ideas: {len(self.ideas)}" + (f" ({self.ideas_reason})" if self.ideas_reason else "") + (" [replayed]" if replayed else "")
        self.run.append_event(line)
        if self.on_event is not None:
            self.on_event(line)

    def _fresh_samples(self, phase: int) -> list[tuple[Node, Messages]]:
        """Samples from ideas (phase 0, or a phase with nothing to improve)."""
        if phase == 0:
            ideas: list[str | None] = list(self.ideas) or [None] * self.cfg.num_samples
        else:
            ideas = [self.ideas[j % len(self.ideas)] if self.ideas else None for j in range(self.cfg.num_samples)]
        out = []
        for i, idea in enumerate(ideas):
            node_id = f"p0-i{i}" if phase == 0 else f"p{phase}-n{i}"
            node = Node(id=node_id, phase=phase, index=i, kind="sample", lineage=node_id, sample=node_id, idea=idea)
            out.append((node, prompts.code_messages(self.problem.source, idea, self.target)))
        return out

    def _pool(self) -> list[strategies.Scored]:
        pool = []
        for node in self.nodes.values():
            if node.code is None or (node.result is None and not self.cfg.dry_run):
                continue
            pool.append(
                strategies.Scored(
                    id=node.id,
                    lineage=node.lineage,
                    speedup=node.speedup,
                    reward=_rank_reward(node.result),
                    order=node.order,
                )
            )
        return pool

    def _parent_view(self, node: Node) -> prompts.ParentView:
        r = node.result
        ops: dict[str, int] = {}
        if r is not None and isinstance(r.extra.get("aten_ops"), dict):
            try:
                from pytest_kernelbench.judge.policy import compute_ops

                ops = compute_ops(r.extra["aten_ops"])
            except ImportError:  # no torch in this process: show them all
                ops = dict(r.extra["aten_ops"])
        return prompts.ParentView(
            id=node.id,
            code=node.code or "",
            outcome=r.outcome.value if r else None,
            speedup=r.speedup if r else None,
            ref_ms=r.ref_ms if r else None,
            new_ms=r.new_ms if r else None,
            device_name=(r.device_name or r.device) if r else "",
            stage=r.stage if r else "",
            message=r.message if r else "",
            aten_ops=ops,
            kernels=_kernel_profile(r.extra.get("kernel_profile")) if r is not None else [],
        )

    def _history(self, parent: Node) -> list[str]:
        """Earlier attempts of the parent's line (all finished: phases are barriers), oldest first."""
        lines = []
        line_nodes = sorted((n for n in self.nodes.values() if n.lineage == parent.lineage and n.id != parent.id), key=lambda n: n.order)
        for n in line_nodes[-HISTORY_LINES:]:
            if n.status == "unusable":
                lines.append(f"{n.id}: the reply was unusable ({n.reason})")
            elif n.result is not None and n.correct:
                note = ""
                if parent.speedup is not None and n.speedup is not None and n.speedup < parent.speedup:
                    note = ", slower than the current candidate"
                lines.append(f"{n.id}: correct, {n.speedup:.3f}x{note}" if n.speedup is not None else f"{n.id}: correct")
            elif n.result is not None:
                r = n.result
                lines.append(f"{n.id}: {r.outcome.value} at stage '{r.stage or '-'}': {prompts.first_line(r.message, 200)}")
        return lines

    def _other_ideas(self, parent: Node) -> list[str]:
        root = self.nodes.get(parent.lineage)
        own = root.idea if root else None
        return [idea for idea in self.ideas if idea != own][:OTHER_IDEAS]

    def _improve_samples(self, phase: int) -> list[tuple[Node, Messages]]:
        rng = strategies.phase_rng(self.cfg.seed, phase)
        plan = strategies.plan_phase(self.cfg.strategy, self._pool(), self.cfg.num_samples, self.cfg.num_parents, rng, self.cfg.elitism)
        if not plan:
            return self._fresh_samples(phase)
        out = []
        j = 0
        for scored, count in plan:
            parent = self.nodes[scored.id]
            messages = prompts.improve_messages(
                self.problem.source, self._parent_view(parent), self._history(parent), self.target, self._other_ideas(parent)
            )
            for _ in range(count):
                node_id = f"p{phase}-n{j}"
                node = Node(id=node_id, phase=phase, index=j, kind="improve", lineage=parent.lineage, sample=node_id, parent=parent.id)
                out.append((node, messages))
                j += 1
        return out

    async def run_phases(self) -> None:
        await self._brainstorm()
        for phase in range(self.cfg.num_phases):
            if self.stop_reason:
                break
            samples = self._fresh_samples(0) if phase == 0 else self._improve_samples(phase)
            await _gather_all(self._sample(node, messages) for node, messages in samples)
            if any(node.status != "skipped" for node, _ in samples):
                self.phases_done = phase + 1
            self._checkpoint()

    # --- reporting -----------------------------------------------------------------------------
    def best(self) -> Node | None:
        with_code = [n for n in self.nodes.values() if n.code is not None]
        correct = [n for n in with_code if n.correct and n.speedup is not None]
        if correct:
            return max(correct, key=lambda n: (n.speedup, -n.order))
        evaluated = [n for n in with_code if n.result is not None]
        if evaluated:
            return max(evaluated, key=lambda n: (_rank_reward(n.result), -n.order))
        return min(with_code, key=lambda n: n.order) if with_code else None

    def _phase_rows(self) -> list[dict[str, Any]]:
        rows = []
        best_so_far: float | None = None
        phases = sorted({n.phase for n in self.nodes.values()})
        for phase in phases:
            nodes = [n for n in self.nodes.values() if n.phase == phase]
            speeds = [n.speedup for n in nodes if n.speedup is not None]
            best_here = max(speeds) if speeds else None
            if best_here is not None:
                best_so_far = best_here if best_so_far is None else max(best_so_far, best_here)
            rows.append(
                {
                    "phase": phase,
                    "samples": sum(1 for n in nodes if n.attempt == 0),
                    "llm_calls": len(nodes),
                    "evaluated": sum(1 for n in nodes if n.result is not None),
                    "correct": len(speeds),
                    "unusable": sum(1 for n in nodes if n.status == "unusable"),
                    "best_speedup": best_here,
                    "best_so_far": best_so_far,
                    "cost_usd": round(sum(float(n.usage.get("cost_usd") or 0.0) for n in nodes), 6),
                }
            )
        return rows

    async def rejudge(self, best: Node | None) -> EvalResult | None:
        """The best correct candidate judged once more, fresh: its speedup is the largest of many noisy
        measurements (a copy of the reference once showed 9.9x in the search, 1.00x re-judged). New
        weights seed (inputs are fresh OS entropy on every call anyway), full timing."""
        if best is None or best.code is None or not best.correct or self.cfg.dry_run:
            return None
        eval_config = dataclasses.replace(self.eval_config, seed=secrets.randbelow(2**31))
        candidate = Candidate(best.code, "", f"kbagent {best.id} (re-judged)")
        try:
            return await asyncio.to_thread(self.evaluator, self.problem, candidate, eval_config)
        except Exception as exc:  # noqa: BLE001 - a broken evaluator is a result
            return _error_result(self.problem, eval_config, candidate, exc)

    def summary(self, finished: bool, best: Node | None, best_path: Path | None, rejudged: EvalResult | None = None) -> dict[str, Any]:
        nodes = list(self.nodes.values())
        finals = list(self.finals.values())
        best_info = None
        if best is not None:
            r = best.result
            reported = rejudged or r  # what is reported: the fresh judgement when there is one
            best_info = {
                "node": best.id,
                "outcome": reported.outcome.value if reported else None,
                "speedup": reported.speedup if reported else None,
                "reward": reported.reward if reported else None,
                "ref_ms": reported.ref_ms if reported else None,
                "new_ms": reported.new_ms if reported else None,
                "rejudged": rejudged is not None,
                # the judge's say on the speedup's spread: fast_p counts a noisy gain only as far as its interval goes
                "speedup_noisy": bool(reported.extra.get("speedup_noisy")) if reported else False,
                "speedup_interval": reported.extra.get("speedup_interval") if reported else None,
                "search_outcome": r.outcome.value if r else None,
                "search_speedup": r.speedup if r else None,
                "path": str(best_path) if best_path else None,
            }
        p = self.problem
        return {
            "version": 1,
            "problem": {
                "id": p.id,
                "level": p.level,
                "problem_id": p.problem_id,
                "name": p.name,
                "origin": p.origin,
                "source_hash": p.source_hash,
            },
            "model": self.cfg.model,
            "strategy": self.cfg.strategy,
            "language": self.target.language,
            "device": self.eval_config.device_label,
            "dry_run": self.cfg.dry_run,
            "finished": finished,
            "stop_reason": self.stop_reason or ("completed" if finished else "running"),
            "best": best_info,
            "llm_calls": self.llm_calls,
            "llm_calls_replayed": self.llm_calls_replayed,
            "llm_errors": self.llm_errors,
            "tokens": {
                "prompt": self.prompt_tokens,
                "completion": self.completion_tokens,
                "total": self.prompt_tokens + self.completion_tokens,
            },
            "cost_usd": round(self.cost_usd, 6),
            "ideas": len(self.ideas),
            "ideas_reason": self.ideas_reason,
            "samples": len(finals),
            "failed_samples": sum(1 for n in finals if not n.passed) if not self.cfg.dry_run else 0,
            "unusable": dict(Counter(n.reason for n in nodes if n.status == "unusable")),
            "outcomes": dict(Counter(n.outcome for n in nodes if n.outcome)),
            "evaluations": self.evaluations,
            "evaluations_run": self.evaluations_run,
            "phases_done": self.phases_done,
            "phases": self._phase_rows(),
            "elapsed_s": round(time.monotonic() - self.started, 3),
        }

    def tree(self) -> list[dict[str, Any]]:
        ideas_node = {
            "id": "ideas",
            "phase": 0,
            "kind": "ideas",
            "status": "ideas" if self.ideas else "unusable",
            "reason": self.ideas_reason,
            "ideas": self.ideas,
            **self.ideas_usage,
        }
        nodes = [n.to_dict() for n in sorted(self.nodes.values(), key=lambda n: n.order)]
        return [ideas_node, *nodes] if self.ideas_usage or self.ideas_reason else nodes

    def _checkpoint(self, finished: bool = False, rejudged: EvalResult | None = None) -> tuple[Node | None, Path | None]:
        best = self.best()
        best_path = self.run.save_best(best.code) if best is not None and best.code is not None else None
        self.run.save_tree(self.tree())
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
    best, best_path = search._checkpoint(finished=True, rejudged=rejudged)
    summary = search.summary(True, best, best_path, rejudged)
    return SearchResult(Path(run_dir), summary, list(search.nodes.values()), best, best_path, rejudged)


def run_search_sync(*args: Any, **kwargs: Any) -> SearchResult:
    """:func:`run_search` from synchronous code (the CLI, the pytest plugin)."""
    return asyncio.run(run_search(*args, **kwargs))


def _kernel_profile(found: object) -> list[tuple[str, float, int]]:
    """(kernel, microseconds, launches) from a result's ``kernel_profile``, longest first; anything malformed is left out."""
    rows = []
    if isinstance(found, dict):
        for name, entry in found.items():
            if isinstance(entry, dict) and isinstance(entry.get("us"), (int, float)) and isinstance(entry.get("launches"), int):
                rows.append((str(name), float(entry["us"]), entry["launches"]))
    return sorted(rows, key=lambda row: -row[1])
