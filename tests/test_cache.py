"""kbagent cache info|prune: the judge's caches on disk, pruned least recently used first, never what is in use."""

import os
import time

import pytest
from filelock import FileLock
from typer.testing import CliRunner

from kbagent.cli import app
from pytest_kernelbench.build.prune import caches, enforce_caps

MIB = 1 << 20
DAY = 86400


def entry(folder, size_mib, age_days, name="blob", depth=0):
    """A cache entry of ``size_mib`` MiB last used ``age_days`` ago (its file ``depth`` folders down)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(b"\0" * (size_mib * MIB))
    when = time.time() - age_days * DAY
    for path in (folder / name, folder, *list(folder.parents)[:depth]):
        os.utime(path, (when, when))


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    for name, sub in (("KB_CACHE_DIR", "cache"), ("KB_BUILD_CACHE", "builds"), ("KB_PCH_DIR", "pch"), ("KB_BYTECODE_CACHE", "bytecode")):
        monkeypatch.setenv(name, str(tmp_path / sub))
    monkeypatch.delenv("KB_CACHE_CAPS", raising=False)
    builds = tmp_path / "builds"
    entry(builds / "aaa", 3, age_days=30)  # the oldest build
    entry(builds / "bbb", 2, age_days=5)
    entry(builds / "ccc", 1, age_days=0)  # just used: may be in use
    entry(builds / "jit-aaa" / "triton", 4, age_days=9, depth=1)
    entry(tmp_path / "pch" / "k1" / "torch", 2, age_days=3, name="extension.h.gch", depth=1)
    entry(tmp_path / "bytecode" / "cpython-311", 1, age_days=1)
    return tmp_path


def cli(*args):
    return CliRunner().invoke(app, ["cache", *args])


def test_info_names_every_cache_with_its_size_entries_and_cap(cache_env):
    result = cli("info")
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines()}
    assert "6.00 GiB" not in result.output and "0.01 GiB" in rows["builds"] and "3 entries" in rows["builds"]
    assert "1 entries" in rows["jit"] and "1 entries" in rows["pch"] and "1 entries" in rows["bytecode"]
    assert "cap 20.00 GiB" in rows["builds"] and str(cache_env / "pch") in rows["pch"] and "0 entries" in rows["judge-triton"]
    sizes = {c.name: sum(e.size for e in c.entries()) for c in caches()}
    assert sizes["builds"] == 6 * MIB and sizes["jit"] == 4 * MIB and sizes["pch"] == 2 * MIB


def test_prune_removes_the_least_recently_used_first_down_to_the_size(cache_env):
    result = cli("prune", "--cache", "builds", "--max-gb", str(3.5 * MIB / (1 << 30)))
    assert result.exit_code == 0, result.output
    assert "builds: removed 1 entries, 0.00 GiB" in result.output  # 6 MiB -> 3 MiB: the 30-day-old one goes
    assert sorted(p.name for p in (cache_env / "builds").iterdir()) == ["bbb", "ccc", "jit-aaa"]


def test_prune_all_keeps_what_a_judge_may_be_using(cache_env):
    lock = FileLock(str(cache_env / "builds" / "bbb.lock"))
    with lock:  # a judge building bbb now
        dry = cli("prune", "--all", "--dry-run")
        assert dry.exit_code == 0 and "builds: would remove 1 entries" in dry.output and (cache_env / "builds" / "aaa").exists()
        result = cli("prune", "--all")
    assert result.exit_code == 0, result.output
    assert "builds: removed 1 entries, 0.00 GiB, 2 in use kept" in result.output
    assert sorted(p.name for p in (cache_env / "builds").iterdir()) == ["bbb", "bbb.lock", "ccc"]
    assert not (cache_env / "pch" / "k1").exists() and not (cache_env / "bytecode" / "cpython-311").exists()


def test_prune_older_than_days(cache_env):
    result = cli("prune", "--older-than", "7")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (cache_env / "builds").iterdir()) == ["bbb", "ccc"]  # aaa (30 days), jit-aaa (9 days) gone
    assert (cache_env / "pch" / "k1").exists()


def test_the_end_of_a_run_prunes_each_cache_to_its_cap(cache_env, monkeypatch):
    monkeypatch.setenv("KB_CACHE_CAPS", f"builds={4 * MIB / (1 << 30)},jit=none")
    done = {p.cache: p for p in enforce_caps()}
    assert done["builds"].removed == 1 and "jit" not in done
    assert not (cache_env / "builds" / "aaa").exists() and (cache_env / "builds" / "jit-aaa").exists()
    monkeypatch.setenv("KB_CACHE_CAPS", "off")
    assert enforce_caps() == []


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [(["prune", "--cache", "wheels"], "", "error: --cache wheels: no such cache; the caches are builds, jit, pch"),
     (["prune", "--max-gb", "-1"], "", "error: --max-gb -1: give 0 or more"),
     (["info"], "builds=lots", "error: KB_CACHE_CAPS: 'builds=lots' is not name=GB")],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(cache_env, monkeypatch, args, env, says):
    if env:
        monkeypatch.setenv("KB_CACHE_CAPS", env)
    result = cli(*args)
    assert result.exit_code == 2 and result.output.strip().startswith(says) and len(result.output.strip().splitlines()) == 1
