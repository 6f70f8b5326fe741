"""The trusted bytecode cache (pytest_kernelbench/build/bytecode.py): where an installation has no bytecode,
one trusted interpreter writes it under a prefix and the judge's processes read it from there."""

import compileall
import marshal
import os
import subprocess
import sys
from pathlib import Path

from pytest_kernelbench.build.bytecode import bytecode_prefix, installed_bytecode
from pytest_kernelbench.judge.sandbox import runner_env


def _package(where: Path, name: str) -> Path:
    (where / name).mkdir(parents=True)
    (where / name / "__init__.py").write_text("VALUE = 'from source'\n")
    (where / name / "sub.py").write_text("OTHER = 1\n")
    return where / name


def _value_seen(where: Path, name: str, prefix: str | None) -> str:
    env = {**os.environ, "PYTHONPATH": str(where), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    if prefix:
        env["PYTHONPYCACHEPREFIX"] = prefix
    done = subprocess.run([sys.executable, "-c", f"import {name}; print({name}.VALUE)"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_package_without_bytecode_is_compiled_once_into_the_prefix_and_read_from_there(tmp_path, monkeypatch):
    package = _package(tmp_path / "site", "kbnobytecode")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    assert not installed_bytecode("kbnobytecode")
    prefix = bytecode_prefix(str(tmp_path / "cache"), ("kbnobytecode", "kbnobytecode.sub"))
    assert prefix is not None and Path(prefix).is_relative_to(tmp_path / "cache")
    mirror = Path(prefix + str(package.resolve()))  # the prefix mirrors the source tree
    assert sorted(p.name.split(".")[0] for p in mirror.glob("*.pyc")) == ["__init__", "sub"]
    assert not (package / "__pycache__").exists()  # nothing written beside the sources
    # A process with the prefix takes the cached file without compiling the source: swap the cached code for other
    # code under the same header (source size and mtime), and that other code is what it runs.
    pyc = next(mirror.glob("__init__*.pyc"))
    pyc.write_bytes(pyc.read_bytes()[:16] + marshal.dumps(compile("VALUE = 'from the cache'\n", str(package / "__init__.py"), "exec")))
    assert _value_seen(tmp_path / "site", "kbnobytecode", prefix) == "from the cache"
    assert _value_seen(tmp_path / "site", "kbnobytecode", None) == "from source"
    # filled once: a second call finds the marker (the swapped file stays)
    bytecode_prefix.cache_clear()
    assert bytecode_prefix(str(tmp_path / "cache"), ("kbnobytecode", "kbnobytecode.sub")) == prefix
    assert _value_seen(tmp_path / "site", "kbnobytecode", prefix) == "from the cache"


def test_an_installation_with_its_bytecode_or_the_cache_off_changes_nothing(tmp_path, monkeypatch):
    _package(tmp_path / "site", "kbwithbytecode")
    compileall.compile_dir(str(tmp_path / "site"), quiet=1)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert installed_bytecode("kbwithbytecode")
    assert bytecode_prefix(str(tmp_path / "cache"), ("kbwithbytecode",)) is None
    _package(tmp_path / "site2", "kbnobytecode2")
    monkeypatch.syspath_prepend(str(tmp_path / "site2"))
    assert bytecode_prefix("off", ("kbnobytecode2",)) is None
    assert not (tmp_path / "cache").exists()


def test_runners_get_the_prefix_and_never_write_bytecode(tmp_path):
    env = runner_env({"PYTHONPYCACHEPREFIX": "/trusted/bytecode", "PYTHONDONTWRITEBYTECODE": ""}, tmp_path / "home", "/pkg", {})
    assert env["PYTHONPYCACHEPREFIX"] == "/trusted/bytecode" and env["PYTHONDONTWRITEBYTECODE"] == "1"
