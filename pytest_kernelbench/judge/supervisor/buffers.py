"""The memory both sides share with the supervisor: fresh inputs made here from the OS's entropy, copied into each
side's shared buffers (one buffer a phase, a :class:`CallSet` per call of a round, the output slots beside them),
moved to a new place in the buffer for every timed GPU call, and unmapped by both runners when a phase ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import secrets
import time
from collections.abc import Iterator
from typing import Any

import torch

from .. import protocol as p
from ..compare import flatten
from ..transport import SharedBuffer, contiguous_strides
from .device import Device
from .plan import BUFFER_ALIGN, SHIFT_STEP, slack_bytes
from .record import Context, Verdict
from .sides import Runners, Side


@dataclasses.dataclass
class CallSet:
    """One call's shared buffers on one side: its inputs (the nodes the runner decodes, the supervisor's views of
    them) and its output slots (views, and the ``expect`` tree naming them)."""

    args: list[p.Node]
    inputs: list[torch.Tensor]
    slots: list[torch.Tensor] = dataclasses.field(default_factory=list)
    expect: p.Node | None = None
    buffer: SharedBuffer | None = None  # the one its tensors are in

    def moved(self, by: int) -> CallSet:
        """This set ``by`` bytes further into its buffer: its nodes and its views."""
        assert self.buffer is not None
        buf = self.buffer

        def view(t: torch.Tensor) -> torch.Tensor:
            return buf.view(t.dtype, list(t.shape), offset=buf.offset_of(t) + by)

        expect = None if self.expect is None else _moved_node(self.expect, by)
        return CallSet([_moved_node(a, by) for a in self.args], [view(t) for t in self.inputs], [view(t) for t in self.slots],
                       expect, buf)  # fmt: skip


@dataclasses.dataclass
class Staged:
    """A round's inputs as they will lie in a side's buffer (:meth:`Buffers.stage`): the bytes, and where they go."""

    place: torch.Tensor  # a byte view of the side's shared buffer
    image: torch.Tensor  # the supervisor's own bytes, as long


class Buffers:
    """Each side's shared buffers, from a device phase's start to its end (:meth:`phase`)."""

    def __init__(self, ctx: Context, runners: Runners, device: Device):
        self.ctx, self.runners, self.device = ctx, runners, device

    @contextlib.contextmanager
    def phase(self, stage: str, shared: bool = False, need: int | None = None) -> Iterator[None]:
        """The device held for one phase (:meth:`Device.hold`); every buffer of the phase freed before it goes."""
        with self.device.hold(stage, shared, need):
            try:
                yield
            except Verdict:  # the evaluation ends here: the candidate is not waited for (it may never answer again)
                self.runners.stop_candidate()
                raise
            except Exception as exc:
                if not (self._candidates_doing(exc, stage)):
                    raise
                self.runners.stop_candidate()
                raise Verdict("runtime_error", f"the device ran out of memory for the judge's own buffers during stage '{stage}' "
                              f"while the candidate's process held device memory ({str(exc).splitlines()[0][:200]})") from None
            finally:
                self.device.close_phase()
                with self.ctx.found.split(f"{stage}.end"):
                    lost = self.end_phase(self.runners.reference, self.runners.candidate, self.runners.problem)
                    if self.ctx.on_gpu:  # the phase's device memory is free before the next holder comes
                        gc.collect()
                        torch.cuda.empty_cache()
            if lost is not None:  # the phase itself ended well (a verdict already on its way is not replaced)
                raise lost
            candidate = self.runners.candidate
            if candidate is not None and candidate.alive():
                self.runners.check_disk(candidate)

    def _candidates_doing(self, exc: Exception, stage: str) -> bool:
        """Whether the judge's own allocation failed for device memory the candidate took (Runners.took_device_memory)."""
        return self.runners.took_device_memory(stage, f"{type(exc).__name__} {exc}")

    # -------------------------------------------------------------- fresh inputs

    def make_inputs(self) -> list[Any]:
        """Fresh inputs from a seed the OS gives for this call alone, on the judged device (``problem.py``)."""
        return self.ctx.problem.inputs(secrets.randbits(62))

    # -------------------------------------------------------------- shared buffers

    def share(self, side: Side, nbytes: int) -> tuple[int, SharedBuffer]:
        """A new shared buffer, mapped by the side's runner before this returns."""
        buf = SharedBuffer.create(nbytes, self.ctx.device)
        [buf_id] = side.new_ids(1)
        try:
            self.runners.ask(side, p.MapBuffers([buf_id], [nbytes]), p.Done, fds=[buf.fd])
        finally:
            buf.close_fd()
        side.buffers[buf_id] = buf
        return buf_id, buf

    def encode(self, side: Side, values: list[Any]) -> CallSet:
        """``values`` copied into a new shared buffer of ``side``: the nodes naming them, and their views here."""
        return self.encode_sets(side, [values])[0]

    def encode_sets(self, side: Side, inputs: list[list[Any]], slots: bool = False, slack: int = 0) -> list[CallSet]:
        """One :class:`CallSet` per list of values, all in one new shared buffer (one mapping for the runner to open,
        however many calls a round holds); with ``slots``, output slots too, shaped as the reference's output; the
        buffer ``slack`` bytes bigger than they need."""
        tensors = [[v for v in flatten(values) if isinstance(v, torch.Tensor)] for values in inputs]
        leaves = tensor_leaves(self.ctx.out_spec) if slots else []
        places, total = [], 0  # byte offsets in the buffer: each call's inputs, then its slots
        for ts in tensors:
            places.append([])
            for n in [t.numel() * t.element_size() for t in ts] + [nbytes(leaf) for leaf in leaves]:
                places[-1].append(total)
                total += -(-n // BUFFER_ALIGN) * BUFFER_ALIGN
        buf_id, buf = self.share(side, total + slack)
        sets = []
        for values, ts, at in zip(inputs, tensors, places, strict=True):
            ins, outs = at[: len(ts)], at[len(ts) :]
            views = [buf.view(t.dtype, list(t.shape), offset=o) for o, t in zip(ins, ts, strict=True)]
            for view, t in zip(views, ts, strict=True):
                view.copy_(t)
            where = iter([(buf_id, o) for o in ins])
            call_set = CallSet([_node(v, where) for v in values], views, buffer=buf)
            if slots:
                placed = list(zip(outs, leaves, strict=True))
                call_set.slots = [buf.view(getattr(torch, leaf["dtype"]), leaf["shape"], offset=o) for o, leaf in placed]
                call_set.expect = expect_node(self.ctx.out_spec, iter([(buf_id, o, leaf) for o, leaf in placed]))
            sets.append(call_set)
        self.ctx.sync()
        return sets

    def refill(self, side: Side, inputs: list[list[Any]]) -> None:
        """New values into the side's first ``len(inputs)`` call sets."""
        for call_set, values in zip(side.sets, inputs, strict=False):
            for view, value in zip(call_set.inputs, (v for v in flatten(values) if isinstance(v, torch.Tensor)), strict=True):
                view.copy_(value)
        self.ctx.sync()

    def stage(self, side: Side, inputs: list[list[Any]]) -> Staged:
        """A round's values laid out as the side's first ``len(inputs)`` call sets lie in its buffer (their output slots
        zeroed), in one tensor of the supervisor's own: :meth:`unstage` then writes them with one copy. Made before a
        round's wall window opens (the candidate never sees it), so that the window holds one copy instead of one a
        value (``--timer round``)."""
        sets = side.sets[: len(inputs)]
        buf = sets[0].buffer
        assert buf is not None and all(s.buffer is buf for s in sets)
        views = [v for s in sets for v in (*s.inputs, *s.slots)]
        lo = min(buf.offset_of(v) for v in views)
        hi = max(buf.offset_of(v) + v.numel() * v.element_size() for v in views)
        image = torch.zeros(hi - lo, dtype=torch.uint8, device=self.ctx.device)
        for call_set, values in zip(sets, inputs, strict=True):
            tensors = [v for v in flatten(values) if isinstance(v, torch.Tensor)]
            for view, value in zip(call_set.inputs, tensors, strict=True):
                at = buf.offset_of(view) - lo
                image[at : at + view.numel() * view.element_size()].view(view.dtype).view(view.shape).copy_(value)
        return Staged(buf.view(torch.uint8, [hi - lo], offset=lo), image)

    def unstage(self, staged: Staged) -> None:
        """A staged round's values into the side's buffer: one copy."""
        staged.place.copy_(staged.image)
        self.ctx.sync()

    def bind(self, sides: tuple[Side, ...] | None = None, calls: int = 1, moving: bool = False) -> None:
        """Input buffers and output slots for this phase, for each side: ``calls`` sets (a timing round's calls); with
        ``moving`` (a GPU time phase), room for :meth:`move` to place them anew for every call."""
        for side in sides or (self.runners.reference, self.runners.candidate):
            sets = [self.make_inputs() for _ in range(calls)]
            side.slack = slack_bytes(calls * sum(self.ctx.fp.io_bytes)) if moving and self.ctx.on_gpu else 0  # a round's
            side.sets = side.home = self.encode_sets(side, sets, slots=True, slack=side.slack)

    def move(self, side: Side) -> None:
        """Place the side's call sets at a new random offset in its buffer (in its slack, :data:`SHIFT_STEP` steps):
        on the H100 a memory-bound reference ran 2-7% slower or faster for as long as its inputs stayed where they were
        put, and read from a new place each round it kept no lean (docs/timing-fidelity.md, "Where a side's inputs sit")."""
        if side.slack:
            by = secrets.randbelow(side.slack // SHIFT_STEP + 1) * SHIFT_STEP
            side.sets = [s.moved(by) for s in side.home]
            side.places.add(by)

    def end_phase(self, *sides: Side | None) -> Verdict | None:
        """Each side unmaps the phase's buffers (its runner synchronises first: an unmap under a running kernel is an
        illegal memory access), then frees its device memory (a gc pass): all sides at once, a side that fails one
        request is not asked the next. The candidate gets its time left for this (the reference 60 s); one that does
        not answer in it is stopped (its mappings go with it): the verdict is returned."""
        live, lost = [], None
        for side in sides:  # not one that was never asked anything since (a runner still starting: seconds, H100)
            if side is not None and (side.asked or side.buffers):
                side.asked = False
                ids = side.drop_buffers()
                side.thaw()
                if side.alive():
                    live.append((side, ids))
        for request in (p.UnmapBuffers, p.Release):
            asked, live = live, []
            for side, ids in asked:
                with contextlib.suppress(Exception):
                    side.channel.send((request(ids) if request is p.UnmapBuffers else request()).to_wire())
                    live.append((side, ids))
            asked, live = live, []
            for side, ids in asked:
                allowed = 60.0 if side.trusted else min(60.0, max(self.ctx.remaining(), 1.0))
                try:
                    self.runners.wait(side, time.monotonic() + allowed)
                    live.append((side, ids))
                except Exception as error:
                    if not side.trusted and lost is None:
                        if side.alive():  # a failure verdict (memory) has stopped it already
                            self.runners.stop(side)
                        lost = error if isinstance(error, Verdict) else Verdict(
                            "timeout", f"did not free the buffers of stage '{self.ctx.status.stage}' in its time left ({allowed:.0f} s)")
        return lost


# -------------------------------------------------------------------- the trees that name shared tensors


def _node(value: Any, places: Iterator[tuple[int, int]]) -> p.Node:
    """``value`` as a tree, each tensor leaf at the next (buffer id, byte offset) of ``places``."""
    if isinstance(value, torch.Tensor):
        buf, offset = next(places)
        return {"t": {"buf": buf, "dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape),
                      "stride": contiguous_strides(list(value.shape)), "offset": offset}}  # fmt: skip
    if isinstance(value, (list, tuple)):
        return {"seq": [_node(v, places) for v in value], "tuple": isinstance(value, tuple)}
    if isinstance(value, dict):
        return {"map": [[str(k), _node(v, places)] for k, v in value.items()]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"v": repr(value)}
    return {"v": value}


def tensor_leaves(spec: p.Node) -> list[dict[str, Any]]:
    if "t" in spec:
        return [spec["t"]]
    if "seq" in spec:
        return [leaf for item in spec["seq"] for leaf in tensor_leaves(item)]
    if "map" in spec:
        return [leaf for _, item in spec["map"] for leaf in tensor_leaves(item)]
    return []


def nbytes(leaf: dict[str, Any]) -> int:
    return math.prod(leaf["shape"]) * torch.empty((), dtype=getattr(torch, leaf["dtype"])).element_size()


def _moved_node(node: p.Node, by: int) -> p.Node:
    """``node`` (:func:`_node`, :func:`_expect`) with every tensor leaf ``by`` bytes further into its buffer."""
    if "t" in node:
        return {"t": {**node["t"], "offset": node["t"]["offset"] + by}}
    if "seq" in node:
        return {**node, "seq": [_moved_node(item, by) for item in node["seq"]]}
    if "map" in node:
        return {"map": [[key, _moved_node(item, by)] for key, item in node["map"]]}
    return node


def expect_node(spec: p.Node, slots: Iterator[tuple[int, int, dict[str, Any]]]) -> p.Node:
    if "t" in spec:
        buf, offset, leaf = next(slots)
        return {"t": {"buf": buf, "dtype": leaf["dtype"], "shape": leaf["shape"], "stride": contiguous_strides(leaf["shape"]),
                      "offset": offset}}  # fmt: skip
    if "seq" in spec:
        return {"seq": [expect_node(item, slots) for item in spec["seq"]], "tuple": spec.get("tuple", False)}
    if "map" in spec:
        return {"map": [[key, expect_node(item, slots)] for key, item in spec["map"]]}
    return {"v": spec.get("v")}
