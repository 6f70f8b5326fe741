"""Which candidates become parents between phases, and how a phase's samples are split over them.

Pure functions over :class:`Scored` records with a caller-seeded ``random.Random``: the same
records and seed always give the same parents (a resumed run replays the same tree).

* ``lineage-topk`` (PIKE's): the fastest correct candidate of each lineage (all descendants of
  one phase-0 idea), the top ``k`` lineages; 10 samples over 4 parents is 3/3/2/2.
* ``elite-diverse``: the best half of ``k`` by speed whatever their lineage, then the best of
  lineages not yet chosen, then random others.
* ``tournament``: ``k`` tournaments of three random entrants; each winner leaves the pool.
* ``roulette``: fitness-proportional draws without replacement (weight: speedup when correct).

Only correct candidates are parents while there is any; before that the least bad candidates
(highest reward) are, so that the search can still repair its way forward. With ``elitism`` the
best-ever candidate is always a parent. Parents come back best first: the best gets the larger share.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence

STRATEGIES = ("lineage-topk", "elite-diverse", "tournament", "roulette")
DEFAULT_STRATEGY = "lineage-topk"
TOURNAMENT_SIZE = 3


@dataclasses.dataclass(frozen=True)
class Scored:
    """One candidate as the strategies see it."""

    id: str
    lineage: str
    speedup: float | None = None  # set only for correct candidates
    reward: float = 0.0
    order: int = 0  # creation order: among equals, the earlier one ranks higher

    @property
    def correct(self) -> bool:
        return self.speedup is not None


def normalize_strategy(name: str) -> str:
    """``lineage_topk``, ``Lineage-TopK`` ... -> ``lineage-topk``; ValueError for unknown names."""
    key = (name or "").strip().lower().replace("_", "-")
    aliases = {"topk": "lineage-topk", "lineage": "lineage-topk", "pike": "lineage-topk", "elite": "elite-diverse"}
    key = aliases.get(key, key)
    if key not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}: choose one of {', '.join(STRATEGIES)}")
    return key


def rank_key(c: Scored) -> tuple:
    """Higher is better: correct before incorrect, then speedup (or reward), then earlier."""
    if c.correct:
        return (1, c.speedup, -c.order)
    return (0, c.reward, -c.order)


def split_samples(num_samples: int, num_parents: int) -> list[int]:
    """Samples per parent, as even as possible, the larger shares first: (10, 4) -> [3, 3, 2, 2]."""
    if num_samples <= 0 or num_parents <= 0:
        return []
    k = min(num_parents, num_samples)
    base, extra = divmod(num_samples, k)
    return [base + (1 if i < extra else 0) for i in range(k)]


def _ranked(pool: Sequence[Scored]) -> list[Scored]:
    return sorted(pool, key=rank_key, reverse=True)


def lineage_topk(pool: Sequence[Scored], k: int, rng: random.Random) -> list[Scored]:
    best: dict[str, Scored] = {}
    for c in _ranked(pool):
        best.setdefault(c.lineage, c)
    return _ranked(best.values())[:k]


def elite_diverse(pool: Sequence[Scored], k: int, rng: random.Random) -> list[Scored]:
    ranked = _ranked(pool)
    chosen = ranked[: max(1, (k + 1) // 2)]
    lineages = {c.lineage for c in chosen}
    for c in ranked:
        if len(chosen) >= k:
            break
        if c.lineage not in lineages:
            chosen.append(c)
            lineages.add(c.lineage)
    rest = [c for c in ranked if c not in chosen]
    rng.shuffle(rest)
    return chosen + rest[: max(0, k - len(chosen))]


def tournament(pool: Sequence[Scored], k: int, rng: random.Random) -> list[Scored]:
    remaining = list(pool)
    chosen: list[Scored] = []
    while remaining and len(chosen) < k:
        entrants = rng.sample(remaining, min(TOURNAMENT_SIZE, len(remaining)))
        winner = max(entrants, key=rank_key)
        chosen.append(winner)
        remaining.remove(winner)
    return chosen


def _weight(c: Scored) -> float:
    if c.correct:
        return max(float(c.speedup), 1e-6)
    return max(c.reward + 8.0, 0.5)  # rewards run from -7 (timeout) to -2 (incorrect)


def roulette(pool: Sequence[Scored], k: int, rng: random.Random) -> list[Scored]:
    remaining = list(pool)
    chosen: list[Scored] = []
    while remaining and len(chosen) < k:
        (pick,) = rng.choices(remaining, weights=[_weight(c) for c in remaining], k=1)
        chosen.append(pick)
        remaining.remove(pick)
    return chosen


_SELECTORS: dict[str, Callable[[Sequence[Scored], int, random.Random], list[Scored]]] = {
    "lineage-topk": lineage_topk,
    "elite-diverse": elite_diverse,
    "tournament": tournament,
    "roulette": roulette,
}


def select_parents(strategy: str, pool: Sequence[Scored], k: int, rng: random.Random, elitism: bool = True) -> list[Scored]:
    """Up to ``k`` distinct parents from ``pool``, best first (see the module docstring)."""
    strategy = normalize_strategy(strategy)
    if not pool or k <= 0:
        return []
    correct = [c for c in pool if c.correct]
    eligible = correct or list(pool)
    parents = _SELECTORS[strategy](eligible, k, rng)
    if elitism:
        best = max(eligible, key=rank_key)
        if best not in parents:
            parents = [best, *parents[: k - 1]]
    return _ranked(parents)


def plan_phase(
    strategy: str, pool: Sequence[Scored], num_samples: int, num_parents: int, rng: random.Random, elitism: bool = True
) -> list[tuple[Scored, int]]:
    """(parent, samples) pairs for one improve phase; empty when the pool is."""
    parents = select_parents(strategy, pool, num_parents, rng, elitism)
    return list(zip(parents, split_samples(num_samples, len(parents)), strict=False))  # more parents than samples: the best ones


def phase_rng(seed: int, phase: int) -> random.Random:
    """The RNG of one phase: independent of what ran before, so resumes choose alike."""
    return random.Random(f"kbagent:{seed}:{phase}")
