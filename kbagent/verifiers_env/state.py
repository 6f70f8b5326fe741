"""The state a rollout of the ``kernelbench`` taskset keeps in tool mode: the judged turns, and whether it finished. Its
own module, so that the taskset (:mod:`.tasks`) and the tools (:mod:`.tools`) both read it without importing each other.
"""

from __future__ import annotations

from typing import Any

import verifiers.v1 as vf
from pydantic import Field


class KernelState(vf.State):
    """What the ``run_kernel`` tool keeps for its rollout (tool mode)."""

    turns: list[dict[str, Any]] = Field(default_factory=list)
    finished: bool = False
