"""The search's LLM calls: each replayed from the run folder when it was made before, else sent
under the budgets (query count, the search's cost cap, a ledger shared with other searches) with
at most ``num_workers`` in flight, saved, and counted (calls, tokens, cost, errors)."""

from __future__ import annotations

import asyncio

from kbagent.budget import SessionBudget
from kbagent.llm import LLM, LLMReply, Messages
from kbagent.runfolder import RunFolder
from kbagent.search.config import SearchConfig


class Calls:
    """The LLM calls of one search and their accounting; ``stop_reason`` says why calls stopped being sent."""

    def __init__(self, config: SearchConfig, llm: LLM, run: RunFolder, problem_id: str, budget: SessionBudget | None):
        self.cfg = config
        self.llm = llm
        self.run = run
        self.problem_id = problem_id
        self.budget = budget
        self.calls_started = 0  # counts against the query budget
        self.llm_calls = self.llm_calls_replayed = self.llm_errors = 0
        self.prompt_tokens = self.completion_tokens = 0
        self.cost_usd = 0.0
        self.stop_reason: str | None = None
        self.seq = run.max_seq()
        self.slots = asyncio.Semaphore(config.num_workers)

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

    async def call(self, call_id: str, messages: Messages) -> tuple[LLMReply, int, bool] | None:
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
        async with self.slots:
            stop = self._cost_stop()  # spending may have gone on while this call waited for a slot
            if stop:
                self.calls_started -= 1
                self.stop_reason = self.stop_reason or stop
                return None
            reply = await self.llm.complete(messages)
        if self.budget is not None:
            self.budget.record(self.problem_id, call_id, reply.cost_usd)
        self.seq += 1
        self.run.save_call(call_id, messages, reply, self.seq)
        self._account(reply)
        return reply, self.seq, False
