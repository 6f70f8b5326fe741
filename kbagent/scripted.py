"""Scripted models for runs with no key and no network.

``scripted/reference`` answers the brainstorm with a few ideas and every code prompt (phase 0,
improve, fix) with the problem's reference renamed to ``ModelNew``: a correct candidate of speedup
about 1, enough to exercise the whole search, the judge and the reports end to end::

    kbagent search problems/mini/1_LeakyReluScale.py --model scripted/reference --device cpu

Importing this module registers the scripts in :data:`kbagent.llm.SCRIPTS`.
"""

from __future__ import annotations

import json
import re

from kbagent import prompts
from kbagent.llm import SCRIPTS, Messages

REFERENCE_IDEAS = [
    "Fuse the whole forward into one kernel so that intermediates never leave registers.",
    "Vectorise memory accesses (four floats per load) and cover the tensor with a grid-stride loop.",
    "Keep PyTorch's library calls for the heavy operator and fuse the cheap elementwise tail into one custom kernel.",
    "Tile the work so that each block reuses its inputs from shared memory or cache.",
]

_MODEL = re.compile(r"\bModel\b")


def _last_user(messages: Messages) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return str(messages[-1].get("content", "")) if messages else ""


def as_model_new(reference: str) -> str:
    """The reference source with ``Model`` renamed to ``ModelNew`` (``nn.Module`` untouched)."""
    return _MODEL.sub("ModelNew", reference)


def reference_script(messages: Messages) -> str:
    text = _last_user(messages)
    if prompts.is_ideas_prompt(text):
        return "Ideas:\n```json\n" + json.dumps(REFERENCE_IDEAS, indent=1) + "\n```\n"
    source = prompts.reference_from_prompt(text)
    if source is None:
        return "I cannot find the reference architecture in this prompt."
    return (
        "Here is ModelNew (the scripted model returns the reference itself, renamed):\n\n```python\n"
        "# scripted/reference: the reference renamed to ModelNew, no optimisation\n" + as_model_new(source).strip("\n") + "\n```\n"
    )


SCRIPTS["reference"] = reference_script
