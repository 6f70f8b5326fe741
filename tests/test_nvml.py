"""judge/nvml.py: whose processes kept the GPU busy while a time phase waited for it (issue 46: a candidate's kernels,
queued before it was stopped, kept the GPU busy 12-14 s after each of its calls; whose was inferred from the times)."""

import os
import time
from types import SimpleNamespace

from pytest_kernelbench.extra import Extra
from pytest_kernelbench.judge import nvml


def _proc(tmp_path, pid: int, cgroup: str) -> None:
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "cgroup").write_text(cgroup)


def test_a_process_is_named_by_the_judge_side_cgroup_it_is_in(tmp_path):
    _proc(tmp_path, 11, "0::/system.slice/kb/4242-candidate-3\n")
    _proc(tmp_path, 12, "12:pids:/x\n0::/user.slice/session-1.scope\n")  # not a judge's runner
    _proc(tmp_path, 13, "0::/kb/4242-judge\n")
    assert nvml.owner(11, str(tmp_path)) == "4242-candidate"
    assert nvml.owner(12, str(tmp_path)) == "pid 12" and nvml.owner(13, str(tmp_path)) == "pid 13"
    assert nvml.owner(14, str(tmp_path)) == "pid 14"  # gone


def test_a_watch_counts_the_samples_that_saw_each_process_busy_but_its_own(tmp_path, monkeypatch):
    _proc(tmp_path, 11, "0::/kb/4242-candidate-3\n")
    asked = []

    class Util:
        def busy(self, since_us):
            asked.append(since_us)
            return {11: 97, 12: 3, os.getpid(): 100}

    monkeypatch.setattr(nvml, "TICK_S", 0.0)
    watch = nvml.BusyWatch(Util(), since_us=5, proc=str(tmp_path))
    watch.tick()
    watch.tick()
    assert watch.seen == {"4242-candidate": 2, "pid 12": 2}
    assert asked[0] == 5 and asked[1] > 5  # each ask: the samples since the one before
    monkeypatch.setattr(nvml, "TICK_S", 60.0)
    watch.tick()  # too soon after the last
    assert len(asked) == 2
    assert nvml.BusyWatch(None).seen == {} and nvml.BusyWatch(None).tick() is None


def test_without_nvml_nothing_is_opened():
    if os.path.exists("/dev/nvidiactl"):
        return  # a GPU machine: tests/test_gpu.py
    assert nvml.ProcessUtilization.open("GPU-00000000-0000-0000-0000-000000000000") is None


def test_a_settle_of_a_second_or_more_keeps_whose_processes_kept_the_gpu_busy(monkeypatch):
    """Device.settle: the GPU busy for 1.2 s after the lock was taken; NVML's samples name a judge's runner."""
    from pytest_kernelbench.judge.supervisor import device as dev

    busy_until = time.monotonic() + 1.2
    extra = Extra()
    status = SimpleNamespace(stage="time", enter=lambda stage: None)
    ctx = SimpleNamespace(on_gpu=True, found=SimpleNamespace(extra=extra, count=lambda key: None), status=status,
                          cfg=SimpleNamespace(setup_timeout=60.0))  # fmt: skip
    device = dev.Device(ctx)
    device.quiet_s = 114e-6
    monkeypatch.setattr(device, "_probe", lambda: 1e-3 if time.monotonic() < busy_until else 14e-6)
    monkeypatch.setattr(device.processes, "utilization", lambda: SimpleNamespace(busy=lambda since: {os.getpid() + 10**6: 99}))
    waited = device.settle()
    assert 1.1 < waited < 5 and len(extra.settle_busy) == 1, extra.settle_busy
    [note] = extra.settle_busy
    other = f"pid {os.getpid() + 10**6}"
    assert note["s"] == round(waited, 3) and note["by"].keys() == {other} and note["by"][other] >= 3, note
    busy_until = time.monotonic() + 0.2
    device.settle()  # shorter than SETTLE_NOTE_S: not kept
    assert len(extra.settle_busy) == 1


def test_own_busy_charges_the_share_of_a_wait_its_processes_were_seen_busy(monkeypatch):
    """KB_CHARGE_STOPPED_KERNELS=1: the seconds a stopped candidate's kernels ran on are its own (Runners.step_aside)."""
    monkeypatch.setattr(nvml, "TICK_S", 0.02)
    busy_until = time.monotonic() + 0.3

    class Util:
        def busy(self, since_us):
            return {77: 90, 78: 5} if time.monotonic() < busy_until else {78: 5}

    watch = nvml.OwnBusy(Util(), [77, 79])
    time.sleep(0.6)
    own = watch.stop()
    assert watch.ticks >= 10 and 0 < watch.busy_ticks < watch.ticks, (watch.ticks, watch.busy_ticks)
    assert 0.15 < own < 0.45, own  # about the first 0.3 s of the 0.6 s wait
    assert nvml.OwnBusy(Util(), [79]).stop() == 0.0  # not its processes


def test_a_step_aside_charges_the_candidate_for_its_kernels_that_ran_while_it_was_stopped(monkeypatch, tmp_path):
    """Runners.step_aside with KB_CHARGE_STOPPED_KERNELS=1: the aside's seconds its processes were busy (NVML, replaced
    here) are not added to its call's deadline, and its time limit counts them; without the setting, none are."""
    from pytest_kernelbench.judge.supervisor.record import Findings, Status
    from pytest_kernelbench.judge.supervisor.sides import Runners

    monkeypatch.setattr(nvml, "TICK_S", 0.02)

    class Util:
        def busy(self, since_us):
            return {4242: 99}

    events = []
    from pytest_kernelbench.judge.supervisor.device import Device

    status = Status(str(tmp_path / "status"))
    status.enter("run")
    ctx = SimpleNamespace(on_gpu=True, status=status, found=Findings())
    device = Device(ctx)
    monkeypatch.setattr(device, "wanted", lambda: 1 << 20)
    monkeypatch.setattr(device, "requeue", lambda: time.sleep(0.4))
    monkeypatch.setattr(device.processes, "utilization", lambda: Util())
    runners = Runners(ctx, device)
    monkeypatch.setattr(runners, "freeze", lambda side: events.append("freeze"))
    side = SimpleNamespace(members=lambda: [4242], thaw=lambda: events.append("thaw"))
    charged_before = status.charged()
    assert runners.step_aside(side) > 0.3 and status.charged_apart == 0.0  # the setting off: all of it no one's
    monkeypatch.setenv("KB_CHARGE_STOPPED_KERNELS", "1")
    uncharged = runners.step_aside(side)
    assert uncharged < 0.1 and 0.3 < status.charged_apart < 0.6, (uncharged, status.charged_apart)
    assert status.charged() - charged_before > status.charged_apart  # its run stage's time, and its kernels'
    assert ctx.found.extra.split_s["stepped_aside.own_kernels"] == status.charged_apart
    assert events == ["freeze", "thaw", "freeze", "thaw"] and ctx.found.extra.stepped_aside == 2


def test_a_judges_view_of_its_gpu_opens_nvml_once_and_a_failing_ask_is_no_view(monkeypatch):
    opened = []
    monkeypatch.setattr(nvml.ProcessUtilization, "open", classmethod(lambda cls, uuid: opened.append(uuid) or "util"))
    view = nvml.GpuProcesses(lambda: "GPU-1")
    assert view.utilization() == view.utilization() == "util" and opened == ["GPU-1"]

    def no_gpu() -> str:
        raise RuntimeError("no CUDA GPUs are available")

    assert nvml.GpuProcesses(no_gpu).utilization() is None and opened == ["GPU-1"]
    monkeypatch.delenv("KB_CHARGE_STOPPED_KERNELS", raising=False)
    assert view.watch_stopped([1]) is None  # the experiment is off unless asked for
