"""The device, shared with other judges: its lock (exclusive to time, shared under memory admission for untimed work),
a quiet GPU (probe kernels that tell when no other context has work queued), the one core both runners time on, and
the CPU-timing marker that stops other evaluations' builds while a CPU judge times.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from filelock import Timeout

from .. import cores, nvml
from ..locking import admitted, cpu_timing_holder, device_lock, mark_cpu_timing, wait_while_cpu_timing
from .plan import (
    PAUSE_LIMIT,
    PROBE_FLOOR_MAX_S,
    SETTLE_AWAY_MAX_S,
    SETTLE_AWAY_S,
    SETTLE_NOTE_S,
    SETTLE_NOTES,
    SETTLE_TURN_S,
    TIME_TURN_S,
    TURN_HANDOFF_S,
    admission_bytes,
    exclusive_need,
    quiet_floor,
)
from .record import Context, Verdict

_perf_counter = time.perf_counter


class Device:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.sharing = False  # in a shared device phase: other judges' work is on the GPU too
        self._lock: Any = None  # the device lock of the phase held now (requeue lets it go and takes it again)
        self._phase = ""  # the stage of the phase held now (its lock_held_s)
        self._cpu_timing = False  # this phase marks the lock folder: builds elsewhere stop (pause_for_timing)
        self.core: set[int] | None = None  # in a GPU time phase: the one core both runners are bound to
        self.nice: int | None = None  # ... and the nice value they and the supervisor run at there (cores.TIMING_NICE)
        self.quiet_s: float | None = None  # a probe kernel's round trip on a quiet GPU
        self._probe_buf: torch.Tensor | None = None
        self._pins: tuple[int, Callable[[], list[list[int]]], int] | None = None  # the timing core, the runners, base nice
        self._away: tuple[float, float, contextlib.ExitStack] | None = None  # sent back: since when, shared since, admission
        self._sent_back = False  # a request was sent back since the Timer last asked (take_sent_back)
        self._since = 0.0  # when the lock was last taken, or the GPU found quiet after it (take_turn)
        self.processes = nvml.GpuProcesses(lambda: str(getattr(torch.cuda.get_device_properties(ctx.device), "uuid", "")))
        self._turns_over = False  # this phase takes no more turns (take_turn: its last one cost more than a turn)

    # -------------------------------------------------------------- the lock

    @contextlib.contextmanager
    def hold(self, stage: str, shared: bool = False, need: int | None = None) -> Iterator[None]:
        """Hold the device for one phase, exclusively or (untimed work) shared with other judges under memory
        admission (:mod:`..locking`: ``need`` bytes, else :func:`plan.admission_bytes`). The caller frees the phase's
        buffers (after :meth:`close_phase`) before this lets go."""
        ctx = self.ctx
        ctx.status.enter("wait_lock")
        lock = device_lock(ctx.cfg.lock_dir, self.key())
        with contextlib.ExitStack() as held:
            try:
                if shared and ctx.on_gpu:
                    held.enter_context(admitted(lock, need or admission_bytes(ctx.fp), self.free_bytes, ctx.cfg.lock_timeout))
                announce = None if shared else exclusive_need(ctx.fp, stage, ctx.problem)
                lock.acquire(timeout=ctx.cfg.lock_timeout, shared=shared, announce=announce)
            except Timeout:
                raise Verdict("harness_error", f"could not take the device lock {lock.lock_file} in {ctx.cfg.lock_timeout:g} s") from None
            self._since = _perf_counter()
            held.callback(ctx.found.add_seconds, "lock_held_s", stage, self._since)  # after the release below
            held.callback(lock.release)
            self.sharing, self._lock, self._phase = shared, lock, stage
            self._cpu_timing = not ctx.on_gpu and stage == "time"
            if self._cpu_timing:  # builds in flight on this machine stop while this phase times (pause_for_timing)
                mark_cpu_timing(ctx.cfg.lock_dir, True)
            ctx.status.enter(stage)
            if ctx.on_gpu:
                free = self.free_bytes() / 2**30
                extra = ctx.found.extra
                extra.min_free_gib_at_lock = round(min(free, extra.min_free_gib_at_lock or free), 2)
            yield

    def close_phase(self) -> None:
        """The phase's work is over (its buffers are freed next, the lock still held)."""
        if self._away is not None:  # ended while sent back (a verdict): the shared hold is not the phase's
            self._tally_away(self._perf_end_shared())
        if self._cpu_timing:
            mark_cpu_timing(self.ctx.cfg.lock_dir, False)
            self._cpu_timing = False
        self.sharing, self._lock, self._sent_back, self._turns_over = False, None, False, False

    def key(self) -> str:
        """The physical device's name in the lock folder (its lock, the footprints remembered for it)."""
        if not self.ctx.on_gpu:
            return "cpu"
        uuid = str(getattr(torch.cuda.get_device_properties(self.ctx.device), "uuid", self.ctx.device.index))
        return f"{self.ctx.found.data['device_name']}:{uuid}"

    def wanted(self) -> int | None:
        """In a shared phase: the bytes an exclusive holder waiting for the lock announced, if one waits and fits."""
        need = self._lock.wanted() if self._lock is not None else None
        return None if need is None or self._too_big(need) else need

    def _too_big(self, need: int | None) -> bool:
        """Whether ``need`` bytes an exclusive waiter announced do not fit in the GPU's free memory now."""
        return need is not None and self.ctx.on_gpu and self.free_bytes() < need

    def requeue(self) -> None:
        """Let the shared lock go and queue for it again, behind the exclusive holder that waits."""
        self._lock.release()
        self._take_back(shared=True)

    def _take_back(self, shared: bool, announce: int | None = None) -> None:
        """Queue again for the phase's lock, let go a moment ago (:meth:`requeue`, :meth:`_let_go_alone`, :meth:`send_back`)."""
        try:
            self._lock.acquire(timeout=self.ctx.cfg.lock_timeout, shared=shared, announce=announce)
        except Timeout:
            lost = f"could not take the device lock {self._lock.lock_file} back in {self.ctx.cfg.lock_timeout:g} s"
            raise Verdict("harness_error", lost) from None
        self._since = _perf_counter()

    def take_turn(self) -> float:
        """Between two rounds of the exclusive time phase, held for TIME_TURN_S since the GPU was found quiet, while
        another judge waits for the lock (and any that waits to hold it alone fits beside this phase's memory): let it go
        until they have it (TURN_HANDOFF_S at most), queue for it again and wait for a quiet GPU. The seconds away (0.0:
        the turn goes on), neither the phase's lock time nor the candidate's (``wait_lock``); counted in
        ``extra.time_turns``. A turn after which the GPU stayed busy for longer than TIME_TURN_S is the phase's last:
        a judge let in queued kernels longer than a turn (a shared phase does not drain), and each further turn would
        let it queue as much again while this phase holds the lock waiting (``extra.time_turns_ended``)."""
        if self.sharing or self._lock is None or self._turns_over or not self._lock.queued():
            return 0.0
        if _perf_counter() - self._since < TIME_TURN_S or self._too_big(self._lock.wanted()):
            return 0.0
        ctx = self.ctx
        stage = ctx.status.stage
        ctx.found.count("time_turns")
        ctx.status.enter("wait_lock")
        away = self._let_go_alone(self._handed_over)
        ctx.found.tally("split_s", f"{self._phase}/turn", away)  # within the batch's part
        ctx.status.enter(stage)
        if self.settle() > TIME_TURN_S:
            self._turns_over = True
            ctx.found.count("time_turns_ended")
        return away

    def _handed_over(self) -> None:
        """Until every waiter holds the lock (its marker goes then), TURN_HANDOFF_S at most."""
        handoff = time.monotonic() + TURN_HANDOFF_S
        while self._lock.queued() and time.monotonic() < handoff:
            time.sleep(0.001)

    def _let_go_alone(self, meanwhile: Callable[[], Any]) -> float:
        """Holding the lock alone: let it go (and a CPU timing's marker), run ``meanwhile``, queue for it alone again as
        the phase did. Returns the seconds away, which are not the phase's lock time."""
        ctx, released = self.ctx, _perf_counter()
        if self._cpu_timing:
            mark_cpu_timing(ctx.cfg.lock_dir, False)
        self._lock.release()
        meanwhile()
        self._take_back(shared=False, announce=exclusive_need(ctx.fp, self._phase, ctx.problem))
        if self._cpu_timing:
            mark_cpu_timing(ctx.cfg.lock_dir, True)
        away = _perf_counter() - released
        ctx.found.tally("lock_held_s", self._phase, -away)
        return away

    def free_bytes(self) -> int:
        return int(torch.cuda.mem_get_info(self.ctx.device)[0])

    def pause_for_timing(self, stop: Callable[[], Any], go: Callable[[], None]) -> float:
        """While another evaluation times on the CPU (its marker in the lock folder), stop a build step (``stop``, then
        ``go``); returns the seconds it was stopped (not charged to it)."""
        lock_dir = self.ctx.cfg.lock_dir
        holder = cpu_timing_holder(lock_dir)
        if holder is None or holder == os.getpid():
            return 0.0
        status = self.ctx.status
        stage, started = status.stage, time.monotonic()
        status.enter("paused")
        stop()
        try:
            wait_while_cpu_timing(lock_dir, poll=0.02, limit=PAUSE_LIMIT, mine=os.getpid())
        finally:
            go()
            status.enter(stage)
        return time.monotonic() - started

    # -------------------------------------------------------------- a cold call sent back

    def send_back(self, stop: Callable[[], Any], go: Callable[[], None]) -> None:
        """The exclusive time phase, its candidate in a request far longer than its warm calls (a recompile, an
        autotune, a graph capture or lazy set-up that the phase's own inputs set off): with the candidate stopped
        (``stop``, then ``go``), the lock goes from exclusive to shared, under memory admission, and the runners leave
        the timing core, so that other judges' work and timing go on while the call finishes (stepping aside for them
        as any shared call does); its time stays its own. Until :meth:`take_back_alone`."""
        stop()
        try:
            self._go_shared()
        finally:
            go()

    def _go_shared(self) -> None:
        ctx = self.ctx
        away = _perf_counter()
        self._unpin()
        if self._cpu_timing:
            mark_cpu_timing(ctx.cfg.lock_dir, False)
        self._lock.release()
        admission = contextlib.ExitStack()
        if ctx.on_gpu:
            try:
                admission.enter_context(admitted(self._lock, admission_bytes(ctx.fp), self.free_bytes, ctx.cfg.lock_timeout))
            except Timeout:
                raise Verdict("harness_error", f"could not take the device lock {self._lock.lock_file} shared in "
                              f"{ctx.cfg.lock_timeout:g} s") from None  # fmt: skip
        self._away = (away, _perf_counter(), admission)  # before the wait: close_phase ends the admission on a failure
        self._take_back(shared=True)
        self._away = (away, _perf_counter(), admission)
        self.sharing = self._sent_back = True

    def take_back_alone(self) -> tuple[float, float]:
        """Back from :meth:`send_back`: the lock exclusive again, the runners on the timing core. The seconds away from
        the exclusive lock and those of them it was held shared: neither is the time phase's lock (``lock_held_s``: the
        shared hold is ``sent_back``)."""
        ctx = self.ctx
        self._lock.release()
        shared_end = self._perf_end_shared()
        self._take_back(shared=False, announce=exclusive_need(ctx.fp, self._phase, ctx.problem))
        away = self._tally_away(shared_end)
        self.sharing = False
        if self._cpu_timing:
            mark_cpu_timing(ctx.cfg.lock_dir, True)
        self._pin()
        return away

    def take_sent_back(self) -> bool:
        """Whether a request was sent back since the last ask."""
        sent, self._sent_back = self._sent_back, False
        return sent

    def _perf_end_shared(self) -> float:
        end = _perf_counter()
        self._away[2].close()
        return end

    def _tally_away(self, shared_end: float) -> tuple[float, float]:
        away, shared_since, _ = self._away
        self._away = None
        found, back = self.ctx.found, _perf_counter()
        found.tally("lock_held_s", self._phase, away - back)
        found.tally("lock_held_s", "sent_back", shared_end - shared_since)
        return back - away, shared_end - shared_since

    # -------------------------------------------------------------- a quiet GPU

    def settle(self) -> float:
        """CUDA, holding the device alone, before the first timed call: wait for work still queued by other judges'
        candidates (a shared phase does not drain, so a stopped candidate's kernels may still run), charged to no one
        (stage ``settle``). Work that outlasts SETTLE_TURN_S is a kernel longer than its owner's step aside: the lock
        goes back for a while (:meth:`give_way`; that owner's call runs on, charged to it, up to its own time limit) and
        is queued for again. A GPU still busy after the setup limit is the harness's error, not a speedup. Returns the
        seconds it took; the phase's turn (:meth:`take_turn`) counts from its end."""
        ctx = self.ctx
        if not ctx.on_gpu:
            return 0.0
        started, since_us, watch = _perf_counter(), time.time_ns() // 1000, []
        stage, limit = ctx.status.stage, ctx.cfg.setup_timeout
        deadline, away = time.monotonic() + limit, SETTLE_AWAY_S

        def tick() -> None:  # the GPU was busy at the first probe: whose kernels (nvml.BusyWatch)
            if not watch:
                watch.append(nvml.BusyWatch(self.processes.utilization(), since_us))
            watch[0].tick()

        ctx.status.enter("settle")
        try:
            while self.until_quiet(min(deadline, time.monotonic() + SETTLE_TURN_S), pause=0.001, tick=tick) is None:
                if time.monotonic() >= deadline:
                    floor_us = (self.quiet_s or PROBE_FLOOR_MAX_S) * 1e6
                    raise Verdict("harness_error", f"the GPU stayed busy with other work for {limit:g} s before timing (no probe "
                                  f"came back within {floor_us:.0f} us; where the GPU is quiet and its probes slower, "
                                  f"KB_PROBE_FLOOR_MAX_US raises the limit)")  # fmt: skip
                self.give_way(away)
                away = min(2 * away, SETTLE_AWAY_MAX_S)
        finally:
            ctx.status.enter(stage)
        self._since = _perf_counter()
        if watch and self._since - started >= SETTLE_NOTE_S:
            notes = ctx.found.extra.settle_busy or []
            if len(notes) < SETTLE_NOTES:
                ctx.found.extra.settle_busy = [*notes, {"s": round(self._since - started, 3), "by": watch[0].seen}]
        return self._since - started

    def charge_stopped(self, watch: nvml.OwnBusy | None) -> float:
        """The seconds a stopped candidate's kernels ran on (:meth:`watch_stopped`), charged to it; 0.0 without a watch."""
        own = watch.stop() if watch is not None else 0.0
        if own:
            self.ctx.status.charge(own)
            self.ctx.found.tally("split_s", "stepped_aside.own_kernels", own)
        return own

    def give_way(self, seconds: float) -> None:
        """Holding the device alone on a GPU another judge's kernel keeps busy: let the lock go for ``seconds``, with
        no announcement (a shared holder stepped aside for this phase continues its call, charged to it), then queue
        for it again as the phase did. Not the phase's lock time."""
        ctx = self.ctx
        ctx.found.count("settle_gave_way")

        def away() -> None:
            time.sleep(seconds)
            ctx.status.enter("wait_lock")

        self._let_go_alone(away)
        ctx.status.enter("settle")

    def until_quiet(self, deadline: float, pause: float = 0.0, tick: Callable[[], None] | None = None) -> float | None:
        """Probe until one comes back as fast as on a quiet GPU: 0.0 when the first one does, else the seconds
        it took; None when ``deadline`` (time.monotonic) passed first. ``pause``: seconds between probes; ``tick``:
        called between them, once the first one found the GPU busy."""
        if self.quiet_s is None:
            self.quiet_s = self.probe_floor()
        start = _perf_counter()
        if self._probe() <= self.quiet_s:
            return 0.0
        while self._probe() > self.quiet_s:
            if time.monotonic() > deadline:
                return None
            if tick is not None:
                tick()
            if pause:
                time.sleep(pause)
        return _perf_counter() - start

    def _probe(self) -> float:
        if self._probe_buf is None:
            self._probe_buf = torch.zeros(1, device=self.ctx.device)
        t0 = _perf_counter()
        self._probe_buf.add_(1)
        torch.cuda.synchronize(self.ctx.device)
        return _perf_counter() - t0

    def probe_floor(self) -> float:
        """How long a probe takes on a quiet GPU (every runner is stopped here), with margin; at most PROBE_FLOOR_MAX_S,
        for another judge's kernel may still run here (a step aside stops processes, not their kernels)."""
        return quiet_floor([self._probe() for _ in range(21)])

    # -------------------------------------------------------------- the timing core

    @contextlib.contextmanager
    def on_timing_core(self, runner_pids: Callable[[], list[list[int]]]) -> Iterator[None]:
        """On a GPU, both runners bound to one core for the time phase (:mod:`..cores`: how fast a process dispatches
        a call depends on the core it landed on, and a short call's event window holds its dispatch), and back to this
        process's cores after it; where the judge may, they and this process run at ``cores.TIMING_NICE`` meanwhile (no
        other work on that core preempts a call's dispatch or sync; their sessions too where the kernel has autogroups;
        ``KB_TIMING_NICE=0``: not). ``KB_TIMING_CORE=0``:
        left where they are. ``runner_pids``: each live runner's tree."""
        core = cores.timing_core(self.ctx.cfg.device_index) if self.ctx.on_gpu else None
        if core is None or os.environ.get("KB_TIMING_CORE", "1") == "0":
            yield
            return
        self._pins = (core, runner_pids, os.getpriority(os.PRIO_PROCESS, 0))
        self._pin()
        try:
            yield
        finally:
            self._unpin()
            self._pins = None

    def _pin(self) -> None:
        """The runners (and, where the judge may, their and this process's nice value) onto the timing core."""
        if self._pins is None:
            return
        core, runner_pids, _ = self._pins
        self.core = {core}
        extra = self.ctx.found.extra
        record = extra.timing_core = extra.timing_core or {"core": core, "threads": 0, "moved_back": 0,
                                                           "autogroups": cores.autogroups()}  # all pairs'
        record["threads"] += sum(cores.bind(pids, self.core)[0] for pids in runner_pids())
        asked = os.environ.get("KB_TIMING_NICE", "1") != "0"
        self.nice = cores.TIMING_NICE if asked and cores.renice([os.getpid()], cores.TIMING_NICE) else None  # its clock too
        if self.nice is not None:
            record["niced"] = record.get("niced", 0) + sum(cores.renice(pids, self.nice) for pids in runner_pids())

    def _unpin(self) -> None:
        """The runners back on this process's cores, and every nice value back where it was."""
        if self._pins is None or self.core is None:
            return
        _, runner_pids, base = self._pins
        self.core = None
        for pids in runner_pids():
            cores.bind(pids, cores.allowed())
            if self.nice is not None:
                cores.renice(pids, base)
        if self.nice is not None:
            cores.renice([os.getpid()], base)
        self.nice = None

    def rebind(self, members: Any) -> None:
        """A frozen candidate's threads back on the timing core (one it moved elsewhere during its call, or started)."""
        if self.core is not None:
            moved = cores.bind(members, self.core)[1]
            self.ctx.found.extra.timing_core["moved_back"] += moved
            if self.nice is not None:  # a thread it started since, or one it lowered itself (its session: at the phase's start;
                cores.renice(members, self.nice, sessions=False)  # one it made since, or made nicer, slows only itself)
