"""What a search reports from its :class:`~kbagent.search.nodes.Tree`: the best node, the
per-phase table, the tree's rows (``tree.json``) and the pieces of ``summary.json`` that describe
the problem and the best candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbagent.search.nodes import Node, Tree, rank_reward
from pytest_kernelbench.problems import Problem
from pytest_kernelbench.result import EvalResult


def best_node(tree: Tree) -> Node | None:
    """The fastest correct node; without one the best-ranked evaluated one; without that the first with code."""
    with_code = [n for n in tree.nodes.values() if n.code is not None]
    correct = [n for n in with_code if n.correct and n.speedup is not None]
    if correct:
        return max(correct, key=lambda n: (n.speedup, -n.order))
    evaluated = [n for n in with_code if n.result is not None]
    if evaluated:
        return max(evaluated, key=lambda n: (rank_reward(n.result), -n.order))
    return min(with_code, key=lambda n: n.order) if with_code else None


def phase_rows(tree: Tree) -> list[dict[str, Any]]:
    rows = []
    best_so_far: float | None = None
    phases = sorted({n.phase for n in tree.nodes.values()})
    for phase in phases:
        nodes = [n for n in tree.nodes.values() if n.phase == phase]
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


def tree_rows(tree: Tree) -> list[dict[str, Any]]:
    ideas_node = {
        "id": "ideas",
        "phase": 0,
        "kind": "ideas",
        "status": "ideas" if tree.ideas else "unusable",
        "reason": tree.ideas_reason,
        "ideas": tree.ideas,
        **tree.ideas_usage,
    }
    nodes = [n.to_dict() for n in sorted(tree.nodes.values(), key=lambda n: n.order)]
    return [ideas_node, *nodes] if tree.ideas_usage or tree.ideas_reason else nodes


def best_info(best: Node | None, best_path: Path | None, rejudged: EvalResult | None) -> dict[str, Any] | None:
    if best is None:
        return None
    r = best.result
    reported = rejudged or r  # what is reported: the fresh judgement when there is one
    return {
        "node": best.id,
        "outcome": reported.outcome.value if reported else None,
        "speedup": reported.speedup if reported else None,
        "reward": reported.reward if reported else None,
        "ref_ms": reported.ref_ms if reported else None,
        "new_ms": reported.new_ms if reported else None,
        "rejudged": rejudged is not None,
        # the judge's say on the speedup's spread: fast_p counts a noisy gain only as far as its interval goes
        "speedup_noisy": bool(reported.extra.speedup_noisy) if reported else False,
        "speedup_interval": reported.extra.speedup_interval if reported else None,
        "search_outcome": r.outcome.value if r else None,
        "search_speedup": r.speedup if r else None,
        "path": str(best_path) if best_path else None,
    }


def problem_info(p: Problem) -> dict[str, Any]:
    return {
        "id": p.id,
        "level": p.level,
        "problem_id": p.problem_id,
        "name": p.name,
        "origin": p.origin,
        "source_hash": p.source_hash,
    }
