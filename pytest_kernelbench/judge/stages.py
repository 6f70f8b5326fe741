"""The stage vocabulary, in one place: every stage a supervisor announces on its status file, whether the time spent
in it is the candidate's (charged against ``--timeout``) or the judge's, and what a failure there means.

Read by the supervisor (its clock of the candidate's time, the verdict when a runner fails), the controller (its
backstop limit, the outcome when a supervisor dies without a result) and the service (a request cut off by its own
limit: a ``timeout`` only in a charged stage, else no reward).
"""

from __future__ import annotations

import dataclasses

from ..outcome import Outcome


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str
    charged: bool  # the candidate's time: its code runs (or is built) here
    failure: Outcome  # the outcome when the candidate's runner fails here (uncharged: the judge's)
    meaning: str


_STAGES = (
    Stage("start", False, Outcome.HARNESS_ERROR, "the supervisor starts (a fresh interpreter imports torch)"),
    Stage("reference", False, Outcome.HARNESS_ERROR, "the problem, the reference's runner and its first call"),
    Stage("wait_lock", False, Outcome.HARNESS_ERROR, "waiting for the device lock or memory admission"),
    Stage("paused", False, Outcome.HARNESS_ERROR, "a build step stopped while another evaluation times on the CPU"),
    Stage("wait_build", False, Outcome.HARNESS_ERROR, "waiting for a build slot, or for another judge's build of this source"),
    Stage("runner_start", False, Outcome.HARNESS_ERROR, "a runner's interpreter starts and imports torch (no candidate code)"),
    Stage("pch", False, Outcome.HARNESS_ERROR, "the judge builds a shared precompiled header a build step asked for"),
    Stage("stepped_aside", False, Outcome.HARNESS_ERROR, "a shared-phase call stopped so that another judge can time"),
    Stage("settle", False, Outcome.HARNESS_ERROR, "holding the device to time, waiting for other judges' GPU work to end"),
    Stage("compile", True, Outcome.COMPILE_ERROR, "the candidate's build step and import"),
    Stage("init", True, Outcome.INIT_ERROR, "ModelNew(*init_inputs)"),
    Stage("run", True, Outcome.RUNTIME_ERROR, "the warm-up call and the correctness trials"),
    Stage("compare", True, Outcome.RUNTIME_ERROR, "a trial's outputs compared"),
    Stage("trace", True, Outcome.RUNTIME_ERROR, "the operator trace (and profile) of one call"),
    Stage("time", True, Outcome.RUNTIME_ERROR, "the exclusive timing phase"),
    Stage("recheck", False, Outcome.HARNESS_ERROR, "the candidate gone: the reference's sensitivity, the speedup"),
    Stage("done", False, Outcome.HARNESS_ERROR, "the result is written"),
)

STAGES: dict[str, Stage] = {stage.name: stage for stage in _STAGES}
CHARGED = frozenset(s.name for s in _STAGES if s.charged)
UNCHARGED = frozenset(s.name for s in _STAGES if not s.charged)
TIMELINE_ENTRIES = 400  # a result's extra.stages_at at most (each step aside adds two)
SETUP_STAGES = frozenset({"start", "reference"})  # the harness's set-up, under --setup-timeout rather than --timeout
CANDIDATE_FAILURE = {s.name: s.failure for s in _STAGES if s.charged}  # a runner's failure in a charged stage



def charged(stage: str) -> bool:
    """Whether time in ``stage`` is the candidate's; an unknown name is not (it cannot be the candidate's doing)."""
    known = STAGES.get(stage)
    return bool(known and known.charged)
