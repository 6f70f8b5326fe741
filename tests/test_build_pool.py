"""The build pool's admission: ``build_jobs`` builds at once, more only while a shared header is being built."""

import threading
import time

from helpers import cpu_config, tiny_problem
from pytest_kernelbench.build import pool as pool_module
from pytest_kernelbench.candidates import Candidate


def _candidate(n: int) -> Candidate:
    return Candidate(f"load_inline(cpp_sources='// {n}')\nclass ModelNew: pass\n", "", f"ext{n}")


class FakeBuilds:
    """Stands in for the build's evaluation: records which builds run at once, holds each until released."""

    def __init__(self):
        self.lock = threading.Lock()
        self.running: list[int] = []
        self.started: list[int] = []
        self.release = threading.Event()

    def __call__(self, problem, candidate, config, *, build_only, build_rank, stop):
        assert build_only
        with self.lock:
            self.running.append(build_rank)
            self.started.append(build_rank)
        self.release.wait(10)
        with self.lock:
            self.running.remove(build_rank)

    def wait_running(self, count: int, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.running) >= count:
                    return True
            time.sleep(0.05)
        return False


def test_spare_builds_start_only_while_a_shared_header_is_being_built(tmp_path, monkeypatch):
    builds = FakeBuilds()
    monkeypatch.setattr(pool_module, "evaluate", builds)
    pch = tmp_path / "pch"
    pch.mkdir()
    config = cpu_config(lock_dir=str(tmp_path / "locks"), build_dir=str(tmp_path / "builds"), pch_dir=str(pch))
    prebuilder = pool_module.Prebuilder(config, 1, spare=1)
    try:
        for n in range(3):
            assert prebuilder.submit(tiny_problem(), _candidate(n))
        assert builds.wait_running(1, 5)
        assert not builds.wait_running(2, 1.0), "a second build started with one job and no header being built"
        (pch / "0123abcd.building").write_text("1")  # a header's build began (build_pch's mark)
        assert builds.wait_running(2, 3), "no spare build started while the header was being built"
        assert not builds.wait_running(3, 1.0), "more than build_jobs + spare builds at once"
        assert builds.started == [0, 1]
        builds.release.set()
        prebuilder.futures[_candidate(2).source_hash].result(timeout=10)  # the third starts once a slot frees
    finally:
        builds.release.set()
        prebuilder.close()
    assert builds.started == [0, 1, 2]


def test_builds_are_admitted_in_the_order_they_were_queued(tmp_path, monkeypatch):
    builds = FakeBuilds()
    monkeypatch.setattr(pool_module, "evaluate", builds)
    config = cpu_config(lock_dir=str(tmp_path / "locks"), build_dir=str(tmp_path / "builds"), pch_dir=str(tmp_path / "pch"))
    prebuilder = pool_module.Prebuilder(config, 1, spare=4)  # five threads, one slot: the rest wait their turn
    try:
        for n in range(5):
            prebuilder.submit(tiny_problem(), _candidate(n))
        assert builds.wait_running(1, 5)
        time.sleep(0.3)  # every other thread is waiting for the slot by now
    finally:
        builds.release.set()
        prebuilder.close()
    assert builds.started == [0, 1, 2, 3, 4]


def test_no_spare_builds_without_a_shared_header(tmp_path):
    config = cpu_config(lock_dir=str(tmp_path / "locks"), build_dir=str(tmp_path / "builds"), pch_dir="off")
    prebuilder = pool_module.Prebuilder(config, 4)
    assert prebuilder.spare == 0
    prebuilder.close()
    other = pool_module.Prebuilder(cpu_config(pch_dir=str(tmp_path / "pch")), 4)
    assert other.spare == 2
    other.close()
