"""The test module the plugin collects: one ``test_kernel`` item per selected problem.

Users do not import this; ``pytest --level 1 ...`` adds it to the session.
"""

from __future__ import annotations

import pytest

from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.plugin import benchmark_bridge, judge
from pytest_kernelbench.plugin.session import result_key
from pytest_kernelbench.report.summary import capped_note, claimed_speedup
from pytest_kernelbench.report.text import printable

_HF_HINTS = ("huggingface", "hf_hub", "from_pretrained", "transformers", "offline")


def test_kernel(kb_problem, kb_session, kb_candidate, request, record_property):
    result = judge(request.config, kb_problem, kb_candidate, kb_session)
    if result.extra.skipped:  # no verdict: the machine cannot judge it (memory, --mode), said in one line
        pytest.skip(result.extra.skipped)
    request.node.stash[result_key] = result
    for name in ("outcome", "speedup", "reward", "ref_ms", "new_ms", "stage", "source_hash"):
        value = getattr(result, name)
        record_property(name, value.value if isinstance(value, Outcome) else value)
    record_property("tolerance", result.tolerance.get("name", ""))
    if result.correct:
        record_property("speedup_noisy", bool(result.extra.speedup_noisy))
        record_property("speedup_capped", bool(result.extra.speedup_capped))
        if claimed_speedup(result) is not None:  # the printed speedup is the supervisor's bound: both numbers
            record_property("speedup_claimed", claimed_speedup(result))
    if "benchmark" in request.fixturenames:
        benchmark_bridge.record(request.getfixturevalue("benchmark"), result)

    if (
        kb_problem.level == "4"
        and result.outcome in (Outcome.COMPILE_ERROR, Outcome.INIT_ERROR, Outcome.UNKNOWN_ERROR, Outcome.HARNESS_ERROR)
        and any(hint in result.message.lower() for hint in _HF_HINTS)
    ):
        pytest.skip(f"level 4 needs Hugging Face weights that could not be loaded: {printable(result.message.strip().splitlines()[-1])}")
    if result.outcome is Outcome.BUILT:
        return  # --device cpu-check passed (compiled, or matched on the CPU): no speed to hold to --min-speedup
    if not result.correct:
        pytest.fail(f"{kb_problem.id}: {result.outcome.value} (stage {result.stage or '-'})\n{printable(result.message)}", pytrace=False)
    if result.speedup is not None and result.speedup < kb_session.min_speedup:
        pytest.fail(
            f"{kb_problem.id}: correct but {result.speedup:.3f}x is below --min-speedup {kb_session.min_speedup:g} "
            f"(ref {result.ref_ms:.4g} ms, new {result.new_ms:.4g} ms){capped_note(result)}",
            pytrace=False,
        )
