"""What the supervisor compares after a call, between its timed windows: the candidate's inputs as they were given,
its outputs as they were sealed at its reply, within the tolerance (its ``atol`` grown with the reference outputs' size
on other input distributions: distributions.atol_scale); a timing round's checked calls on standard inputs first all at
once (compare.close_together), each alone where that does not find them all right (which says why).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ...tolerance import Tolerance
from ..compare import Sealer, close_together, compare_tensors, digest_value, flatten, values_equal
from ..distributions import STANDARD, atol_scale, finite, output_size, strays
from .record import Context, Record, Verdict
from .sides import Runners


class Checks:
    """The comparisons of one evaluation: its trials' tolerances (the first standard trial's output size is what a
    varied one's ``atol`` grows against) and every checked call's verdict."""

    def __init__(self, ctx: Context, runners: Runners, sealer: Sealer):
        self.ctx, self.runners, self.sealer = ctx, runners, sealer
        self.standard_size: float | None = None  # the first trial's reference outputs' size (distributions.output_size)
        self.atol_scale = 1.0  # the factor trial_tolerance last applied to atol (distributions.atol_scale)

    def trial_tolerance(self, variant: str) -> Tolerance:
        """The tolerance of a trial on ``variant``: ``atol`` grown with the reference outputs' size against the first
        (standard) trial's, under ``--inputs varied`` (distributions.atol_scale); the configured one otherwise."""
        self.atol_scale = 1.0
        if self.ctx.cfg.inputs == STANDARD or (variant == STANDARD and self.standard_size is not None):
            return self.ctx.cfg.tol
        slots = list(self.runners.reference.sets[0].slots)
        if variant == STANDARD:  # the first trial's: the size the varied ones are held against
            self.standard_size = output_size(slots)
        else:
            self.atol_scale = self.grown(slots)
        return self.ctx.cfg.tol.atol_times(self.atol_scale)

    def grown(self, slots: list[torch.Tensor]) -> float:
        """How much a varied call's ``atol`` grows: its reference outputs' size against the first trial's."""
        return atol_scale(self.standard_size, output_size(slots)) if self.standard_size is not None else 1.0

    def call_tolerance(self, index: int) -> Tolerance | None:
        """A varied timed call's tolerance (as a varied trial's: ``atol`` grown with the reference's outputs), or None
        where the reference's answer to it is not all finite (that call is not compared)."""
        slots = list(self.runners.reference.sets[index].slots)
        return self.ctx.cfg.tol.atol_times(self.grown(slots)) if finite(slots) else None

    def round(self, label: str, inputs: list[list[Any]], records: dict[str, Record], checks: list[bool], varied: list[str]) -> int:
        """A round's checked calls compared, each within its tolerance; how many were. Its checked calls on standard
        inputs are first compared all at once (:meth:`all_right`); where that does not find them all right, each alone."""
        found, compared = self.ctx.found, 0
        with found.split("time/round.check"):
            standard = [i for i in range(len(inputs)) if checks[i] and varied[i] == STANDARD]
            together = set(standard) if len(standard) > 1 and self.all_right(inputs, records, standard) else set()
            if together:
                found.count("checked_together", len(together))
            for i, values in enumerate(inputs):
                if i in together:
                    compared += 1
                    continue
                tol = self.call_tolerance(i) if checks[i] and varied[i] != STANDARD else self.ctx.cfg.tol
                if checks[i] and tol is not None:
                    name = f"{label}, call {i + 1}" if len(inputs) > 1 else label
                    name += f" (inputs {varied[i]})" if varied[i] != STANDARD else ""
                    self.call(values, records["candidate"], records["reference"], name, i, tol=tol, variant=varied[i])
                    compared += 1
                    if varied[i] != STANDARD:
                        found.count("varied_checked_calls")
        return compared

    def all_right(self, inputs: list[list[Any]], records: dict[str, Record], calls: list[int]) -> bool:
        """Whether ``calls`` of a round are all right, as :meth:`call` would find each (inputs as given, the same
        non-tensor values, outputs as sealed and within the configured tolerance), told in one pass over their slots
        (compare.close_together); False says only that each is to be checked alone."""
        new, ref = records["candidate"], records["reference"]
        mine, theirs = self.runners.candidate.sets, self.runners.reference.sets
        tol = self.ctx.cfg.tol
        for i in calls:
            got, want = new.replies[i], ref.replies[i]
            if got.mismatch or not _same_values(got, want, tol) or len(new.seals[i]) != len(mine[i].slots):
                return False
        leaves = range(len(theirs[calls[0]].slots))
        groups = [([mine[i].slots[j] for i in calls], [theirs[i].slots[j] for i in calls], [new.seals[i][j] for i in calls])
                  for j in leaves]
        pristine = {i: _tensors(inputs[i]) for i in calls}
        if any(len(pristine[i]) != len(mine[i].inputs) for i in calls):
            return False
        unchanged = [([mine[i].inputs[k] for i in calls], [pristine[i][k] for i in calls]) for k in range(len(pristine[calls[0]]))]
        return close_together(groups, unchanged, tol, self.sealer)

    def call(self, values: list[Any], new: Record, ref: Record, label: str, index: int = 0, tol: Tolerance | None = None,
              variant: str = STANDARD) -> float:  # fmt: skip
        """Call ``index`` of a round: the candidate's inputs as they were given, its output against the reference's
        (within ``tol``, by default the configured tolerance; on a ``variant`` of the inputs, a few strays of rounding
        beyond it are counted, not failed: distributions.strays)."""
        tol = tol or self.ctx.cfg.tol
        mine_set, theirs_set = self.runners.candidate.sets[index], self.runners.reference.sets[index]
        changed = _first_changed(mine_set.inputs, _tensors(values))
        if changed is not None:
            raise Verdict("rejected", f"ModelNew.forward modified input {changed} in place ({label})")
        got, want = new.replies[index], ref.replies[index]
        if got.mismatch:
            raise Verdict("incorrect", f"{label}: {got.mismatch}")
        if not _same_values(got, want, tol):
            raise Verdict("incorrect", f"{label}: output values {got.values[:5]!r}, expected {want.values[:5]!r}")
        worst = 0.0
        several = len(theirs_set.slots) > 1
        for i, (mine, theirs, seal) in enumerate(zip(mine_set.slots, theirs_set.slots, new.seals[index], strict=True)):
            sealed = digest_value(seal)
            why, diff = compare_tensors(mine, theirs, tol, None, self.sealer, sealed)
            stray = strays(mine, theirs, tol, self.sealer, sealed) if why and variant != STANDARD and math.isfinite(diff) else None
            if why and stray is None:
                raise Verdict("incorrect", f"{label}: output{f' {i}' if several else ''}: {why}")
            if stray:
                self.ctx.found.count("varied_strays", stray)
            worst = max(worst, diff)
        return worst


def _first_changed(inputs: list[torch.Tensor], pristine: list[torch.Tensor]) -> int | None:
    for i, (after, before) in enumerate(zip(inputs, pristine, strict=True)):
        if not torch.equal(after, before):
            return i
    return None


def _tensors(values: list[Any]) -> list[torch.Tensor]:
    """The tensors among a call's input values, in order: what the candidate's input slots were given."""
    return [v for v in flatten(values) if isinstance(v, torch.Tensor)]


def _same_values(got: Any, want: Any, tol: Tolerance) -> bool:
    """Whether a call's non-tensor output values (``got``: the candidate's reply) are the reference's (``want``)."""
    return len(got.values) == len(want.values) and all(values_equal(a, b, tol) for a, b in zip(got.values, want.values, strict=True))
