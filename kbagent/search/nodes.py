"""The search tree's records: a :class:`Node` per LLM call that should yield a candidate, the
:class:`Tree` of a search (nodes, each sample's last attempt, the brainstorm's ideas), how a
result ranks (:func:`rank_reward`), and the :class:`SearchResult` a search returns."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from kbagent import prompts
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.result import EvalResult


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
class Tree:
    """What a search has found so far: every node by id, each sample's last attempt, and the brainstorm."""

    nodes: dict[str, Node] = dataclasses.field(default_factory=dict)
    finals: dict[str, Node] = dataclasses.field(default_factory=dict)  # sample id -> its last attempt
    ideas: list[str] = dataclasses.field(default_factory=list)
    ideas_reason: str = ""
    ideas_usage: dict[str, Any] = dataclasses.field(default_factory=dict)


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


def rank_reward(result: EvalResult | None) -> float:
    """A result's reward for ranking; a harness error (no verdict, no reward) ranks as an unknown error, and a
    candidate that passed ``--device cpu-check`` (built, untimed) below every correct one and above every failure."""
    if result is None:
        return 0.0
    if result.outcome is Outcome.BUILT:
        return -1.0
    return result.reward if result.reward is not None else -6.0
