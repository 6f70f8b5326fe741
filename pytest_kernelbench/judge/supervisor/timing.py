"""A call on the supervisor's clock, a timed round of both sides on the same fresh inputs (its checks: checks.py), and
the time phase: warm-up rounds, then timed batches until the stopping rule is met, each batch's claims cross-checked against
the supervisor's own wall clock (a batch it does not vouch for is timed again; a second failure rejects).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import secrets
import statistics
import time
from typing import Any

from ...config import AUTO_ROUND_BELOW_MS
from .. import protocol as p
from ..compare import Sealer, compare_chunked
from ..distributions import STANDARD, TIMED_ONE_IN, finite, vary
from ..stats import Stopper, WallCheck, cap_matters, wall_check
from .buffers import Buffers
from .checks import Checks
from .device import Device
from .plan import (
    AUTO_ROUND_CALLS,
    COLD_CALL_FACTOR,
    COLD_CALL_MIN_S,
    EARLY_CHECKED,
    EARLY_REL_ERR,
    EARLY_SAMPLES,
    MIN_CHECKED,
    REWARM_ROUNDS,
    SENT_BACK_MAX,
    TOGETHER_ROUND_CALLS,
    calls_per_round,
    check_timed_call,
    early_stop,
)
from .record import Context, Record, Verdict
from .sides import Runners, Side

_perf_counter = time.perf_counter


class SentBack(Exception):
    """A round whose candidate request was sent back to a shared hold (Device.send_back): its times are not kept."""


class Timer:
    def __init__(self, ctx: Context, runners: Runners, buffers: Buffers, device: Device):
        self.ctx, self.runners, self.buffers, self.device = ctx, runners, buffers, device
        self.sealer = Sealer()
        self.checks = Checks(ctx, runners, self.sealer)
        self.samples: dict[str, list[float]] = {"reference": [], "candidate": []}  # the runners' claims, ms
        self.walls: dict[str, list[float]] = {"reference": [], "candidate": []}  # the supervisor's own clock, ms
        self.round_calls = 1  # calls of each side in one timing round (plan.calls_per_round)
        self.confirmed_new_ms = 0.0  # the candidate's time the wall clock vouches for (stats.wall_check)
        self.dropped_why = ""  # why judged_pair last dropped an input variant (--inputs varied)
        self.timed_variants: list[str] = []  # the variants a timed call may take: those the trials checked (--inputs varied)
        self.warm_ref_ms: list[float] = []  # the reference's time per call in each warm-up round, alone on the device
        self.apart = False  # --timer round given up for this candidate: a round wrong with work left off its stream
        self.trial_new_ms: list[float] = []  # the candidate's calls in the trials, on the supervisor's clock
        self.sent_back = 0  # rounds of the time phase whose candidate request was sent back (rewarm)
        self.joint = self.joint_timer(ctx.fp.ref_ms)  # a round's calls are to be timed together, where a round holds several

    @property
    def together(self) -> bool:
        """Whether a round's calls are timed together (``--timer round``, or ``auto`` for short calls; rounds of several
        calls)."""
        return self.joint and self.round_calls > 1 and not self.apart

    @property
    def most_calls(self) -> int:
        return TOGETHER_ROUND_CALLS if self.joint else AUTO_ROUND_CALLS

    def joint_timer(self, ref_ms: float) -> bool:
        """Whether a round's calls are timed together: ``--timer round``; ``auto`` on a GPU where the reference's call
        (``ref_ms``, its fastest so far) is shorter than AUTO_ROUND_BELOW_MS, where a call's own window, holding the
        supervisor's work for it (about 0.4 ms), is too noisy for the wall clock to vouch for a gain (small kernels:
        docs/timing-fidelity.md, "A round's calls timed together")."""
        timer = self.ctx.cfg.timer
        return timer == "round" or (timer == "auto" and self.ctx.on_gpu and ref_ms < AUTO_ROUND_BELOW_MS)

    @property
    def unit(self) -> str:
        return "call" if self.round_calls == 1 else "round"

    # -------------------------------------------------------------- the time phase

    def time(self) -> None:
        """Warm-up, then reference and candidate interleaved, each call on fresh inputs; every warm-up call and
        the timed calls :func:`plan.check_timed_call` picks are checked. A batch whose times the supervisor's clock
        does not vouch for is timed again, and the candidate is rejected only when the second batch, too, fails
        (an honest candidate's overhead is noise, a cheat's is there every time: docs/timing-fidelity.md)."""
        ctx, found, extra = self.ctx, self.ctx.found, self.ctx.found.extra
        candidate = self.runners.candidate
        self.warm_ref_ms, self.apart = [], False
        self.joint = self.joint_timer(ctx.fp.ref_ms)
        with self.buffers.phase("time"), self.device.on_timing_core(self.runners.live_pids):
            with found.split("time.settle"):
                self.device.settle()
            graph = ctx.cfg.timer == "cuda-graph" and ctx.on_gpu
            self.round_calls = 1 if graph else calls_per_round(ctx.fp, ctx.cfg.round_calls, self.most_calls)
            extra.calls_per_round = self.round_calls
            with found.split("time.bind"):
                self.buffers.bind(calls=self.round_calls, moving=not graph)  # a graph reads the places it was captured with
            if candidate.slack:
                extra.input_slack_mib = candidate.slack >> 20
            while True:  # only steady calls are timed: a round with a call sent back starts again after a shared warm-up
                try:
                    graph, check, first = self.warm_and_time(graph)
                    break
                except SentBack as sent:
                    graph = self.rewarm(str(sent), graph)
            if candidate.slack:  # how many places its inputs were read from (the phase's end drops them)
                extra.input_places = len(candidate.places)
        extra.wall_check = check.to_dict()
        if not check.ok:
            raise Verdict("rejected", check.message() + f" (and in a first batch of timed calls: {first.excess_ms * 1e3:.0f} us "
                          f"over a bound of {first.bound_ms * 1e3:.0f} us)")  # fmt: skip
        self.confirmed_new_ms = check.confirmed_ms

    def warm_and_time(self, graph: bool) -> tuple[bool, WallCheck, WallCheck | None]:
        """The time phase's warm-up rounds, then its timed batch, and a second where the first asks for one: whether
        CUDA-graph timing still holds, the standing batch's wall-clock check and a first batch's that failed."""
        ctx, found, extra = self.ctx, self.ctx.found, self.ctx.found.extra
        self.warm_ref_ms, first = [], None
        with found.split("time.warmup"):
            warm = math.ceil(ctx.cfg.warmup / self.round_calls)  # the warm-up's calls, in whole rounds, each checked
            for k in range(warm + 1):
                if k == warm and not self.longer_rounds(graph):
                    break  # else one more warm-up round, on the longer rounds' new sets
                graph, _ = self.timed_round(f"warm-up {self.unit} {k + 1}", k % 2 == 1, graph, keep=False)
                for key in ("timed_calls", "checked_calls"):
                    found.count(key, self.round_calls)
        extra.timer = "cuda-graph" if graph else "round" if self.together else "events" if ctx.on_gpu else "perf_counter"
        extra.wall_check_first_batch = None
        with found.split("time.batch"):
            graph, check = self.timed_batch(graph)
        if not check.ok:  # a batch the clock did not vouch for is timed again; a second failure rejects
            first = check
            extra.wall_check_first_batch = first.to_dict()
            with found.split("time.second_batch"):
                graph, check = self.timed_batch(graph, again=True)
        elif cap_matters(check, statistics.median(self.samples["candidate"]), ctx.on_gpu):
            # a claim the clock could not verify, by more than the device's band, is timed once more: the
            # better-verified batch stands (within the band, a second batch cannot move the speedup past it)
            kept = (check, self.samples, self.walls)
            extra.wall_check_first_batch = check.to_dict()
            with found.split("time.second_batch"):
                graph, check = self.timed_batch(graph, again=True)
            if not check.ok:  # the first batch passed: the second's failure is noise, not a lie shown twice
                check, self.samples, self.walls = kept
        return graph, check, first

    def cold_after(self, calls: int) -> float | None:
        """Seconds a candidate request of ``calls`` calls may run in the exclusive time phase before it is sent back
        (Device.send_back); None outside that phase, and after SENT_BACK_MAX rounds sent back."""
        if self.sent_back >= SENT_BACK_MAX or self.device.sharing or self.ctx.status.stage != "time":
            return None
        return self.cold_limit(calls)

    def cold_limit(self, calls: int) -> float | None:
        """COLD_CALL_FACTOR times the candidate's calls' median in the trials, ``calls`` of them, at least COLD_CALL_MIN_S
        (None where no trial timed it)."""
        if not self.trial_new_ms:
            return None
        return max(COLD_CALL_MIN_S, COLD_CALL_FACTOR * calls * statistics.median(self.trial_new_ms) / 1e3)

    def rewarm(self, label: str, graph: bool) -> bool:
        """After a round sent back (``label``), with the lock still shared: warm-up rounds, untimed and checked, until
        the candidate's calls are back under :meth:`cold_limit` (REWARM_ROUNDS at most); then the lock alone
        again and a quiet GPU. Counted in ``extra.sent_back``. Returns whether CUDA-graph timing still holds."""
        found, limit = self.ctx.found, self.cold_limit(self.round_calls) or 0.0
        self.sent_back += 1
        with found.split("time.rewarm"):
            for k in range(REWARM_ROUNDS):
                self.walls = {"reference": [], "candidate": []}
                graph, _ = self.timed_round(f"warm-up {self.unit} {k + 1} after a call sent back", k % 2 == 1, graph, keep=True)
                if self.walls["candidate"][-1] * self.round_calls / 1e3 < limit:
                    break
            away_s, shared_s = self.device.take_back_alone()
        with found.split("time.settle"):
            self.device.settle()
        entry = {"round": label, "limit_s": round(limit, 3), "away_s": round(away_s, 3), "shared_s": round(shared_s, 3),
                 "rewarm_rounds": k + 1}  # fmt: skip
        found.extra.sent_back = [*(found.extra.sent_back or []), entry]
        return graph

    def longer_rounds(self, graph: bool) -> bool:
        """Rounds of more calls where the reference's warm-up calls, alone on the device, allow them
        (:func:`plan.calls_per_round`): the fastest call before the phase was timed in shared phases, where other judges'
        work slows it (H200, PIKE corpus: models of 1-3 ms timed one call a round, each round paying a runner's wake and
        stop). The phase's buffers are bound again for them; whether they were."""
        ctx = self.ctx
        if graph or ctx.cfg.round_calls or not ctx.on_gpu or not self.warm_ref_ms:
            return False
        self.joint = self.joint or self.joint_timer(min(self.warm_ref_ms))
        calls = calls_per_round(dataclasses.replace(ctx.fp, ref_ms=min(self.warm_ref_ms)), 0, self.most_calls)
        if calls <= self.round_calls:
            return False
        self.round_calls = ctx.found.extra.calls_per_round = calls
        with ctx.found.split("time.bind"):
            self.buffers.bind(calls=calls, moving=True)
        return True

    def timed_batch(self, graph: bool, again: bool = False) -> tuple[bool, WallCheck]:
        """Timed calls until the stopping rule is met and at least MIN_CHECKED of them were checked (new samples
        each batch); then the wall-clock cross-check of the batch."""
        cfg, extra = self.ctx.cfg, self.ctx.found.extra
        robust = os.environ.get("KB_ROBUST_STOP", "1") != "0"  # the early stop's precision (Stopper.precise): IQR, or the std
        stopper = Stopper(cfg.timing_min_reps, cfg.max_reps, cfg.max_time, cfg.rel_err, self.round_calls, robust)
        self.samples, self.walls = {"reference": [], "candidate": []}, {"reference": [], "candidate": []}
        started, rounds, checked, why = _perf_counter(), 0, 0, ""
        name = f"timed {self.unit}" + (" (second batch)" if again else "")
        early = early_stop(self.ctx.fp, cfg.min_reps, self.round_calls)

        def enough() -> bool:
            nonlocal why
            if early and checked >= EARLY_CHECKED and stopper.precise(self.samples, EARLY_SAMPLES, EARLY_REL_ERR):
                why = "early" if len(self.samples["reference"]) < cfg.timing_min_reps else "rule"  # the full rule's samples
                return True
            why = stopper.why(self.samples, _perf_counter() - started)
            return bool(why) and checked >= min(MIN_CHECKED, cfg.max_reps)

        while not enough():
            if self.samples["reference"]:  # the reference's calls as timed here, alone on the device
                early = early_stop(self.ctx.fp, cfg.min_reps, self.round_calls, statistics.median(self.samples["reference"]))
            checks = [check_timed_call(self.ctx.fp, cfg.check_all_below_mb, early) for _ in range(self.round_calls)]
            varied = [self.timed_variant() for _ in range(self.round_calls)]
            label = f"{name} {rounds + 1}"
            graph, compared = self.timed_round(label, rounds % 2 == 1, graph, keep=True, checks=checks, varied=varied)
            rounds, checked = rounds + 1, checked + compared
            started += self.device.take_turn()  # a long timing lets a waiting judge time between its rounds
        extra.timing_stop = why  # early, rule or max_time (stats.Stopper.why)
        if early:  # which standard error the early stop read (stats.Stopper.precise)
            extra.early_stop_se = "iqr" if robust else "stdev"
        self.ctx.found.count("checked_calls", checked)
        self.ctx.found.count("timed_calls", rounds * self.round_calls)
        s, w = self.samples, self.walls
        calls = self.round_calls if self.together else 1  # the floor is a round's: its calls share it (stats.wall_check)
        return graph, wall_check(s["reference"], w["reference"], s["candidate"], w["candidate"], self.ctx.device.type, calls)

    # -------------------------------------------------------------- rounds and calls

    def judged_pair(self, label: str, candidate_first: bool, variant: str = STANDARD, trace: bool = False) -> float | None:
        """A correctness trial: one call of each side on the same fresh inputs (redrawn as ``variant`` says:
        judge/distributions.py), compared; the largest difference. None, with the candidate not called, where the
        reference raises on the variant's values or answers values that are not all finite (why: ``dropped_why``): the
        caller drops that variant, so that a candidate that checks the same domain is never blamed for it.
        ``trace``: the candidate's call is also its operator trace (``p.Call.trace``), kept in ``extra.aten_ops``."""
        found = self.ctx.found
        if variant != STANDARD and not self._reference_answers(variant, label):
            return None
        with found.split("run/pair.inputs"):
            values = vary(self.buffers.make_inputs(), variant)
        new = self.runners.candidate
        records = {side.name: self.call(side, [values], label=label, trace=trace and side is new) for side in self._order(candidate_first)}
        if trace and records["candidate"].replies[0].ops is not None:
            found.extra.aten_ops, found.extra.aten_ops_all_threads = records["candidate"].replies[0].ops, False
        self.trial_new_ms.append(records["candidate"].wall_ms)
        if variant == STANDARD:
            self.ctx.fp.ref_ms = min(self.ctx.fp.ref_ms, records["reference"].replies[0].ms)
        elif not self._reference_finite():  # this draw, unlike the probe's
            return None
        tol = self.checks.trial_tolerance(variant)
        self.ctx.status.enter("compare")
        with found.split("run/pair.check"):
            return self.checks.call(values, records["candidate"], records["reference"], label, tol=tol, variant=variant)

    def _reference_answers(self, variant: str, label: str) -> bool:
        """The reference alone on a draw of ``variant`` (other values than the trial's, so that nothing it leaves in
        memory is the trial's answer): whether it answers, all finite; else why not, in ``dropped_why``."""
        ref = self.runners.reference
        with self.ctx.found.split("run/pair.inputs"):
            probe = vary(self.buffers.make_inputs(), variant)
        try:
            self.call(ref, [probe], label=f"{label}, the reference alone")
        except Verdict as verdict:
            if not ref.alive():  # a reference that died is the judge's failure, as on standard inputs
                raise
            self.dropped_why = _exception_line(verdict.message)
            return False
        return self._reference_finite()

    def _reference_finite(self) -> bool:
        """Whether the reference's last output is all finite; else why not, in ``dropped_why``."""
        if finite(list(self.runners.reference.sets[0].slots)):
            return True
        self.dropped_why = "the reference's output is not all finite"
        return False

    def timed_variant(self) -> str:
        """The distribution of a timed call's inputs: one of the variants the trials checked with probability
        1/TIMED_ONE_IN, drawn from the OS's entropy apart from whether the call is checked; else the problem's own."""
        if not self.timed_variants or secrets.randbelow(TIMED_ONE_IN) != 0:
            return STANDARD
        return self.timed_variants[secrets.randbelow(len(self.timed_variants))]

    def _order(self, candidate_first: bool) -> tuple[Side, Side]:
        ref, new = self.runners.reference, self.runners.candidate
        return (new, ref) if candidate_first else (ref, new)

    def timed_round(self, label: str, candidate_first: bool, graph: bool, keep: bool, checks: list[bool] | None = None,
                    varied: list[str] | None = None) -> tuple[bool, int]:
        """One round: each side's calls on the same fresh inputs (a set per call, redrawn as ``varied`` says), one side
        after the other; the checked calls compared. A sample is a round's mean time per call, claimed and on the wall
        clock: a side has every input of the round before its first call, so it could move work between the round's
        calls (answer them all in the first, then copy), which a median over calls would not see and a round's sum
        does. Returns whether CUDA-graph timing still holds and how many calls were compared."""
        found = self.ctx.found
        varied = varied or [STANDARD] * self.round_calls
        with found.split("time/round.inputs"):  # one list of values per call
            inputs = [vary(self.buffers.make_inputs(), variant) for variant in varied]
        checks = checks or [True] * self.round_calls
        records = {side.name: self.call(side, inputs, label=label, graph=graph, seal=checks) for side in self._order(candidate_first)}
        try:
            compared = self.checks.round(label, inputs, records, checks, varied)
        except Verdict as verdict:
            offstream = any(reply.offstream for rec in records.values() for reply in rec.replies)
            if verdict.outcome != "incorrect" or not self.together or not offstream:
                raise
            # work outlived a call's stream, so an output may have been copied before it was done (a call's output
            # is copied right after it, in the round's span): this round, and every later one, call by call, each
            # output copied after a whole-device sync, as the events timer does; the wrong answer is not held against it
            self.apart = True
            extra = self.ctx.found.extra
            extra.timer, extra.round_timer_off = "events", f"{label}: wrong with work left off its stream; timed call by call"
            return self.timed_round(label, candidate_first, graph, keep, checks, varied)
        if self.device.take_sent_back():  # its outputs were checked; its times are not those of steady calls
            raise SentBack(label)
        for side, rec in records.items():
            offstream = sum(reply.offstream for reply in rec.replies)
            if offstream:
                counts = found.extra.offstream_calls = found.extra.offstream_calls or {}
                key = "ref" if side == "reference" else "new"
                counts[key] = counts.get(key, 0) + offstream
            claim = math.fsum(reply.ms for reply in rec.replies) / len(rec.replies)
            if keep:
                self.samples[side].append(claim)
                self.walls[side].append(rec.wall_ms / len(rec.replies))
            elif side == "reference":  # a warm-up round's: what longer_rounds sizes the rounds by
                self.warm_ref_ms.append(claim)
        errors = [r.graph_error for rec in records.values() for r in rec.replies if r.graph_error]
        if graph and errors:
            found.extra.cuda_graph_error = errors[0]
            return False, compared
        return graph, compared

    def call(self, side: Side, inputs: list[list[Any]], *, label: str = "", graph: bool = False, seal: list[bool] | None = None,
             trace: bool = False) -> Record:
        """One side's calls of a round (one per list of values, each on its own call set), on the supervisor's clock
        from writing their inputs to the GPU being quiet again after the last.

        The candidate's runner is stopped (SIGSTOP, which cannot be caught) whenever it is not serving a request:
        nothing of the candidate's runs while the reference is called or compared. After its reply, a side's output is
        sealed and, on a GPU, the supervisor waits until no other context has work queued (:meth:`drain`), once before
        the side is stopped and once after: kernels a candidate left running behind its reply are waited for on its own
        wall clock, never on the reference's.
        """
        ctx, runners, found = self.ctx, self.runners, self.ctx.found
        part = f"{ctx.status.stage}/call"  # split_s: where a call's time goes in each phase (within its parts, hence '/')
        with found.split(f"{part}.wake"):
            # continued (ask thaws it) and awake before the clock: neither is its time, and its inputs are still old ones
            runners.ask(side, p.Ping(), p.Done, label=label, stop=False)
            # the GPU is quiet at the start: the pair's fresh inputs may still be being drawn (asynchronous kernels), and
            # the first side of a pair would pay for them in its window, a cost the other's window has not (stats.wall_check)
            ctx.sync()
        self.buffers.move(side)  # before the clock: new views and nodes, no device work
        together = self.together and len(inputs) > 1
        staged = self.buffers.stage(side, inputs) if together else None  # the supervisor's own memory: not yet the side's
        start = _perf_counter()
        with found.split(f"{part}.inputs"):
            if staged is not None:
                self.buffers.unstage(staged)
            else:
                self.buffers.refill(side, inputs)
        sets = side.sets[: len(inputs)]
        request = p.Calls([p.Call(s.args, s.expect, graph, trace) for s in sets], together=together)
        send_back = (self.cold_after(len(sets)) or 0.0) if side is runners.candidate else 0.0  # 0: never
        with found.split(f"{part}.request"):
            replies = runners.ask(side, request, p.CalledEach, label=label, stop=False, send_back=send_back).calls
        if len(replies) != len(sets):
            raise runners.failure(side, ctx.status.stage, f"{label}: {len(replies)} replies to {len(sets)} calls")
        # both sides seal a checked call, so that their wall windows hold the same work (stats.wall_check)
        seal = seal or [True] * len(sets)
        with found.split(f"{part}.seal"):
            taken = iter(self.sealer.take_many([slot for s, sealed in zip(sets, seal, strict=True) if sealed for slot in s.slots]))
            seals = [[next(taken) for _ in s.slots] if sealed else [] for s, sealed in zip(sets, seal, strict=True)]
            ctx.sync()  # the seals are computed
        with found.split(f"{part}.drain"):
            self.drain(side)  # kernels it left queued behind its reply are its own time
        wall = (_perf_counter() - start) * 1e3
        # Stopping it is not its time (a sandboxed tree costs more to stop than the reference's process); what
        # it launched before it stopped is: a GPU still busy after the stop is waited for and charged to it.
        with found.split(f"{part}.stop"):
            runners.freeze(side)
            wall += self.drain(side) * 1e3
        return Record(replies, wall, seals)

    def drain(self, side: Side) -> float:
        """CUDA: launch a tiny kernel of ours until one comes back at once (another context's queued work delays it by
        its time slices); returns the seconds waited beyond a first quiet probe (0.0 on a quiet GPU, and on CPU). A side
        that keeps the GPU busy past its time limit times out.

        Not in a shared phase: other judges' work keeps the GPU busy there (two judges draining would wait on each
        other's probes for ever), and nothing there is timed; its outputs are sealed at the reply, so work the candidate
        left queued that changes them later is still caught."""
        ctx = self.ctx
        if not ctx.on_gpu or self.device.sharing:
            return 0.0
        allowed = ctx.cfg.setup_timeout if side.trusted else max(ctx.remaining(), 0.0)
        waited = self.device.until_quiet(time.monotonic() + allowed)
        if waited is None:
            raise self.runners.timed_out(side, ctx.status.stage)
        return waited

    def sensitivity(self) -> tuple[float | None, bool | None]:
        """How much the reference output moves between two random inputs (METR's near-constant problems), and whether
        it stays within the tolerance (a near-constant output); (None, None) without floating-point outputs."""
        ref = self.runners.reference
        self.call(ref, [self.buffers.make_inputs()])
        first = [s.clone() for s in ref.slots if s.is_floating_point()]
        self.call(ref, [self.buffers.make_inputs()])
        second = [s for s in ref.slots if s.is_floating_point()]
        if not first or not any(t.numel() for t in first):
            return None, None
        spread, suspect = 0.0, True
        for a, b in zip(first, second, strict=True):
            if a.numel():
                _, over, diff = compare_chunked(a, b, self.ctx.cfg.tol)
                spread, suspect = max(spread, diff), suspect and over == 0
        scale = max(float(a.abs().max()) for a in first if a.numel()) or 1.0
        return spread / scale, bool(suspect)


def _exception_line(message: str) -> str:
    """The line of a failure's message that names the exception (``ValueError: ...``), else its first line."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    named = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", line)]
    return (named[-1] if named else lines[0] if lines else "")[:300]
