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

The modules: :mod:`~kbagent.search.config` (settings), :mod:`~kbagent.search.nodes` (the tree's
records), :mod:`~kbagent.search.calls` (LLM calls, budgets, replay), :mod:`~kbagent.search.evaluations`
(judging, GPUs, re-judging), :mod:`~kbagent.search.planning` (what each call is asked),
:mod:`~kbagent.search.report` (best node, tables, summary pieces) and :mod:`~kbagent.search.engine`
(the loop and :func:`run_search`). This package re-exports the names other code uses.
"""

from kbagent.search.config import SearchConfig, make_search_llm
from kbagent.search.engine import run_search, run_search_sync
from kbagent.search.evaluations import Evaluator, default_eval_jobs, visible_gpus
from kbagent.search.nodes import Node, SearchResult
from kbagent.search.planning import HISTORY_LINES, OTHER_IDEAS, _kernel_profile

__all__ = [
    "HISTORY_LINES",
    "OTHER_IDEAS",
    "Evaluator",
    "Node",
    "SearchConfig",
    "SearchResult",
    "_kernel_profile",
    "default_eval_jobs",
    "make_search_llm",
    "run_search",
    "run_search_sync",
    "visible_gpus",
]
