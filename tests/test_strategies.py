"""Parent selection and sample splits (kbagent.strategies): pure functions, seeded."""

import random

import pytest

from kbagent.strategies import (
    STRATEGIES,
    Scored,
    normalize_strategy,
    phase_rng,
    plan_phase,
    select_parents,
    split_samples,
)


def correct(id_, lineage, speedup, order=0):
    return Scored(id=id_, lineage=lineage, speedup=speedup, reward=speedup - 1, order=order)


def failed(id_, lineage, reward, order=0):
    return Scored(id=id_, lineage=lineage, speedup=None, reward=reward, order=order)


# six lineages; lineage a holds the two fastest candidates
POOL = [
    correct("a1", "a", 3.0, 1),
    correct("a2", "a", 2.5, 2),
    correct("b1", "b", 2.0, 3),
    correct("c1", "c", 1.5, 4),
    correct("d1", "d", 1.2, 5),
    correct("e1", "e", 0.8, 6),
    failed("f1", "f", -2.0, 7),
]


@pytest.mark.parametrize(
    ("samples", "parents", "split"),
    [(10, 4, [3, 3, 2, 2]), (10, 3, [4, 3, 3]), (8, 4, [2, 2, 2, 2]), (3, 4, [1, 1, 1]), (5, 1, [5]), (0, 4, []), (4, 0, [])],
)
def test_split_samples(samples, parents, split):
    assert split_samples(samples, parents) == split
    assert sum(split) == (samples if parents else 0)


def test_lineage_topk_is_pikes_best_of_each_lineage_split_3_3_2_2():
    plan = plan_phase("lineage-topk", POOL, num_samples=10, num_parents=4, rng=random.Random(0))
    assert [(p.id, n) for p, n in plan] == [("a1", 3), ("b1", 3), ("c1", 2), ("d1", 2)]
    # never two parents of one lineage, even though a2 is faster than b1
    assert len({p.lineage for p, _ in plan}) == 4


def test_only_correct_candidates_are_parents_while_there_are_any():
    for strategy in STRATEGIES:
        parents = select_parents(strategy, POOL, 6, random.Random(1))
        assert all(p.correct for p in parents), strategy


def test_without_correct_candidates_the_least_bad_are_parents():
    pool = [failed("x", "x", -5.0, 1), failed("y", "y", -2.0, 2), failed("z", "z", -3.0, 3)]
    parents = select_parents("lineage-topk", pool, 2, random.Random(0))
    assert [p.id for p in parents] == ["y", "z"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_elitism_keeps_the_best_ever_candidate(strategy):
    for seed in range(25):
        parents = select_parents(strategy, POOL, 2, random.Random(seed), elitism=True)
        assert parents[0].id == "a1", (strategy, seed)  # best first: it gets the larger share
        assert len(parents) == len({p.id for p in parents}) <= 2


def test_without_elitism_a_random_strategy_can_miss_the_best():
    missed = [seed for seed in range(40) if "a1" not in [p.id for p in select_parents("roulette", POOL, 1, random.Random(seed), False)]]
    assert missed, "roulette over six correct candidates always picked the best one"


def test_elite_diverse_takes_the_best_then_new_lineages():
    parents = select_parents("elite-diverse", POOL, 4, random.Random(0))
    ids = [p.id for p in parents]
    assert ids[:2] == ["a1", "a2"]  # the elite half, same lineage allowed
    assert set(ids[2:]) == {"b1", "c1"}  # then the best of lineages not yet chosen


def test_tournament_prefers_fast_candidates():
    wins = {c.id: 0 for c in POOL}
    for seed in range(200):
        for p in select_parents("tournament", POOL, 1, random.Random(seed), elitism=False):
            wins[p.id] += 1
    assert wins["e1"] == 0  # the slowest correct one never wins a three-way tournament
    assert wins["a1"] > wins["d1"]


def test_roulette_is_weighted_by_speedup():
    counts = {c.id: 0 for c in POOL}
    for seed in range(400):
        for p in select_parents("roulette", POOL, 1, random.Random(seed), elitism=False):
            counts[p.id] += 1
    assert counts["a1"] > counts["e1"] * 2


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_same_seed_same_parents(strategy):
    first = plan_phase(strategy, POOL, 10, 4, phase_rng(7, 2))
    again = plan_phase(strategy, POOL, 10, 4, phase_rng(7, 2))
    assert first == again
    assert sum(n for _, n in first) == 10


def test_empty_pool_gives_no_plan():
    assert plan_phase("tournament", [], 10, 4, random.Random(0)) == []


@pytest.mark.parametrize(
    ("name", "canonical"), [("lineage_topk", "lineage-topk"), ("Elite-Diverse", "elite-diverse"), ("pike", "lineage-topk")]
)
def test_strategy_names(name, canonical):
    assert normalize_strategy(name) == canonical


def test_unknown_strategy_names_the_choices():
    with pytest.raises(ValueError, match="unknown strategy 'greedy': choose one of lineage-topk, elite-diverse, tournament, roulette"):
        normalize_strategy("greedy")
