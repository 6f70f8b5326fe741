"""End-to-end runs of the plugin through pytester: a user's pytest in an empty folder."""

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import torch  # imported before pytester snapshots sys.modules: torch must not be imported twice

from helpers import BROKEN, DATA, REPO, SHARED_KB, TESTS
from pytest_kernelbench.result import EvalResult, rewarded_speedup

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
TINY = DATA / "tiny"
TINY_ARGS = ["--level", "9", "--dataset", str(TINY), "-p", "no:cacheprovider"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    # Inner runs must not believe they are xdist workers of this session (pytest-benchmark would turn off).
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "KERNELBENCH_DATASET"):
        monkeypatch.delenv(name, raising=False)
    # The tiny test problem lives in a KernelBench-style folder as level 9, which the CLI does not know:
    # let the plugin accept it for these tests only.
    monkeypatch.setenv("KB_EXTRA_LEVELS", "9")


def solutions_with(pytester, files):
    folder = pytester.path / "sols" / "level9"
    folder.mkdir(parents=True)
    for target, source in files.items():
        shutil.copy(BROKEN / f"{source}.py", folder / f"{target}.py")
    return str(pytester.path / "sols")


def test_collect_only_lists_readable_ids_with_no_test_files(pytester):
    result = pytester.runpytest_subprocess("--collect-only", "-q", *TINY_ARGS)
    result.stdout.fnmatch_lines(["*test_kernel[[]L9-1_TinyLinear[]]", "1 test collected*"])
    assert result.ret == 0


def test_a_printed_node_id_pasted_back_selects_that_item_from_any_folder(pytester):
    """pytest prints ``::test_kernel[...]`` for our items when run outside this package's folder."""
    listed = pytester.runpytest_subprocess("--collect-only", "-q", "--level", "mini", "--problems", "1-3")
    ids = [line for line in listed.stdout.lines if "test_kernel[" in line]
    assert len(ids) == 3 and ids[1].startswith("::test_kernel[")
    again = pytester.runpytest_subprocess("--collect-only", "-q", "--level", "mini", "--problems", "1-3", ids[1])
    assert [line for line in again.stdout.lines if "test_kernel[" in line] == [ids[1]]
    within = pytester.runpytest_subprocess("--collect-only", "-q", "--level", "mini", f"pytest_kernelbench/plugin/kernel_items.py{ids[2]}")
    assert [line for line in within.stdout.lines if "test_kernel[" in line] == [ids[2]]


def test_a_node_id_printed_with_the_dataset_folder_as_rootdir_pastes_back_from_another_folder(pytester):
    """From a folder without a pytest config, pytest takes ``--dataset``'s folder for its rootdir and names a failed
    item relative to where it ran: ``FAILED ../..::test_kernel[...]``, a directory with a selection that pytest
    itself refuses."""
    (pytester.path / "kb" / "level9").mkdir(parents=True)
    shutil.copy(TINY / "level9" / "1_TinyLinear.py", pytester.path / "kb" / "level9" / "1_TinyLinear.py")
    shutil.copy(TINY / "level9" / "1_TinyLinear.py", pytester.path / "kb" / "level9" / "2_TinyToo.py")
    sols = solutions_with(pytester, {"2_TinyToo": "compile_error"})
    args = [sys.executable, "-m", "pytest", "-rf", "--level", "9", "--dataset", str(pytester.path / "kb"), "--solutions", sols,
            "--device", "cpu", "-p", "no:cacheprovider"]  # fmt: skip
    deep, elsewhere = pytester.path / "a" / "b", pytester.path / "c"
    deep.mkdir(parents=True)
    elsewhere.mkdir()
    run = subprocess.run(args, cwd=deep, capture_output=True, text=True, timeout=300)
    (failed,) = [line.split()[1] for line in run.stdout.splitlines() if line.startswith("FAILED ")]
    folder, _, selection = failed.partition("::")  # the rootdir (the common folder of the run's and the dataset's)
    assert (deep / folder).is_dir() and selection == "test_kernel[L9-2_TinyToo]", run.stdout
    for cwd in (deep, elsewhere):
        again = subprocess.run([*args, "--collect-only", "-q", failed], cwd=cwd, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stdout + again.stderr
        assert [line for line in again.stdout.splitlines() if "test_kernel[" in line] == ["::test_kernel[L9-2_TinyToo]"]


def test_a_test_file_of_the_users_is_not_taken_for_an_item_of_ours():
    from pytest_kernelbench.plugin import ITEMS_MODULE, _item_arg

    assert _item_arg("tests/test_mine.py::test_kernel[x]") == "tests/test_mine.py::test_kernel[x]"
    assert _item_arg("tests/test_mine.py::test_other") == "tests/test_mine.py::test_other"
    assert _item_arg("../../kb::test_kernel[L1-19_ReLU]") == f"{ITEMS_MODULE}::test_kernel[L1-19_ReLU]"


def test_with_a_build_pool_candidates_without_a_build_are_judged_first(pytester):
    """The bundled CPU solutions of mini problems 1-3 build C++ extensions: the pool builds them while 4-10 are judged."""
    def order(*extra):
        args = ("--collect-only", "-q", "--level", "mini", "--device", "cpu", "--solutions", str(REPO / "solutions"), *extra)
        listed = pytester.runpytest(*args).stdout.lines
        return [line.split("Lmini-")[1].split("_")[0] for line in listed if "test_kernel[" in line]

    assert order("--build-jobs", "2") == ["4", "5", "6", "7", "8", "9", "10", "1", "2", "3"]
    assert order("--build-jobs", "0") == [str(n) for n in range(1, 11)]  # no pool: the collection's order


@pytest.mark.skipif(not (SHARED_KB / "problems.jsonl").is_file(), reason="KernelBench data not beside the checkout")
def test_collect_kernelbench_level1(pytester):
    result = pytester.runpytest_subprocess("--collect-only", "-q", "--level", "1", "--dataset", str(SHARED_KB / "problems.jsonl"))
    result.stdout.fnmatch_lines(["*test_kernel[[]L1-19_ReLU[]]", "100 tests collected*"])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--level", "7"], "ERROR: --level 7: unknown level*"),
        (["--level", "1"], "ERROR: level 1 needs KernelBench data: pass --dataset PATH*"),
        (["--problems", "3", *TINY_ARGS], "ERROR: --problems: level 9 has no problem id 3*"),
        (["--solutions", "nowhere", *TINY_ARGS], "ERROR: --solutions nowhere: no such folder*"),
        (["--device", "cuda", *TINY_ARGS], "ERROR: --device cuda: no CUDA device is visible*"),
        (["--device", "cpu", "--kb-timer", "cuda-graph", *TINY_ARGS], "ERROR: --kb-timer cuda-graph needs --device cuda*"),
        (["--atol", "-1", *TINY_ARGS], "ERROR: --atol -1.0: give a finite number of at least 0 (e.g. 1e-2)"),
        (["--kb-max-memory", "-1", *TINY_ARGS], "ERROR: --max-memory/--kb-max-memory -1: must be 0 or more"),
        (["--min-speedup", "-2", *TINY_ARGS], "ERROR: --min-speedup -2.0: must be 0 or more"),
        (["--build-cache", "/proc/no-such", *TINY_ARGS], "ERROR: --build-cache /proc/no-such: cannot make or write it (*)*"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(pytester, args, says):
    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret != 0
    result.stderr.fnmatch_lines([says])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tolerance", "loose"], "ERROR: --tolerance loose: choose kernelbench, pike, backendbench, or ATOL[[],RTOL[]] (numbers*"),
        (["--tolerance", "1e-3,-1"], "ERROR: --tolerance 1e-3,-1: choose kernelbench, pike, backendbench, or ATOL[[],RTOL[]]*"),
        (["--atol", "nan"], "ERROR: --atol nan: give a finite number of at least 0 (e.g. 1e-2)"),
        (["--rtol", "inf"], "ERROR: --rtol inf: give a finite number of at least 0 (e.g. 1e-2)"),
    ],
)
def test_a_bad_tolerance_is_a_one_line_usage_error_before_any_work(pytester, args, says):
    result = pytester.runpytest_subprocess(*args, *TINY_ARGS, "--device", "cpu")
    assert result.ret == 4
    result.stderr.fnmatch_lines([says])
    assert "Traceback" not in result.stderr.str() and "kernelbench summary" not in result.stdout.str()


@pytest.mark.parametrize(("name", "value"), [("KB_PROBE_FLOOR_MAX_US", "abc"), ("KB_DISK_GB", "-1")])
def test_a_bad_numeric_setting_in_the_environment_is_a_one_line_usage_error_before_any_work(pytester, monkeypatch, name, value):
    """config.ENV_NUMBERS, read by every supervisor (judge/supervisor/plan.py): checked once, before anything is judged."""
    monkeypatch.setenv(name, value)
    result = pytester.runpytest_subprocess(*TINY_ARGS, "--device", "cpu")
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"ERROR: {name}='{value}': give a positive number (default *)"])
    assert "Traceback" not in result.stderr.str() and "kernelbench summary" not in result.stdout.str()


def test_the_tolerance_asked_for_is_in_the_header_the_report_and_junit(pytester):
    report, junit = pytester.path / "kb.json", pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(*TINY_ARGS, "--solutions", "baseline", "--device", "cpu", "--tolerance", "pike",
                                           "--rtol", "0.05", f"--kb-report={report}", f"--junitxml={junit}")  # fmt: skip
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["kernelbench: 1 problems (level 9), *, tolerance: pike --rtol 0.05"])
    (row,) = json.loads(report.read_text())["results"]
    assert row["tolerance"]["name"] == "pike --rtol 0.05" and row["tolerance"]["float32"] == [0.01, 0.05]
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).iter("property")}
    assert props["tolerance"] == "pike --rtol 0.05"


def test_baseline_run_writes_json_junit_and_benchmark(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # every column of the results table (at 80 the optional ones are left out)
    report, junit, bench = (pytester.path / name for name in ("kb.json", "junit.xml", "bench.json"))
    result = pytester.runpytest_subprocess(
        *TINY_ARGS, "--solutions", "baseline", "--device", "cpu", "-v",
        f"--kb-report={report}", f"--junitxml={junit}", f"--benchmark-json={bench}",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*L9-1_TinyLinear*correct*", "*kernelbench summary: 1 judged*", "*fast_0*100.0%*"])
    (head,) = [line for line in result.stdout.lines if line.startswith("Name (time in")]  # pytest-benchmark's table
    assert head.split()[-4:] == ["Min", "Median", "IQR", "Rounds"] and len(head) < 120, head  # not its ten columns

    data = json.loads(report.read_text())
    assert data["finished"] is True and data["options"]["solutions"] == "baseline"
    assert data["environment"]["torch"] and data["summary"]["outcomes"]["correct"] == 1
    (row,) = data["results"]
    assert row["problem"] == "L9-1_TinyLinear" and row["outcome"] == "correct" and row["speedup"] > 0
    assert row["extra"]["sandbox"] and row["extra"]["wall_check"]["ok"] is True  # judged in a runner, cross-checked

    props = {p.get("name"): p.get("value") for p in ET.parse(junit).iter("property")}
    assert props["outcome"] == "correct" and float(props["speedup"]) == pytest.approx(row["speedup"])
    assert float(props["reward"]) == pytest.approx(row["reward"]) == pytest.approx(rewarded_speedup(EvalResult.from_dict(row)) - 1)
    assert props["tolerance"] == row["tolerance"]["name"] == "kernelbench"  # level 9 is no PIKE level: KernelBench's

    (bench_row,) = json.loads(bench.read_text())["benchmarks"]
    assert bench_row["stats"]["rounds"] == len(row["new"]["samples"])
    assert bench_row["stats"]["median"] == pytest.approx(row["new"]["median"] / 1e3)
    assert bench_row["extra_info"]["kb_speedup"] == pytest.approx(row["speedup"])


def test_failed_items_name_their_stage_and_the_run_goes_on(pytester):
    sols = solutions_with(pytester, {"1_TinyLinear": "runtime_error"})
    (pytester.path / "sols" / "level9" / "2_Other.py").write_text("# no problem 2 is selected\n")
    report = pytester.path / "kb.json"
    result = pytester.runpytest_subprocess(*TINY_ARGS, "--solutions", sols, f"--kb-report={report}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*L9-1_TinyLinear: runtime_error (stage run)*", "*invalid configuration argument*"])
    assert json.loads(report.read_text())["results"][0]["reward"] == -3


def test_missing_solution_skips_with_reason(pytester):
    (pytester.path / "empty").mkdir()
    result = pytester.runpytest_subprocess(*TINY_ARGS, "--solutions", str(pytester.path / "empty"), "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no solution for L9-1_TinyLinear*"])


def test_min_speedup_fails_correct_but_slow_items(pytester):
    result = pytester.runpytest_subprocess(*TINY_ARGS, "--solutions", "baseline", "--min-speedup", "50")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*correct but *x is below --min-speedup 50*"])


def test_xdist_workers_report_to_the_controller(pytester, tmp_path):
    """...and a worker of a CPU judge never imports torch (2.5-4 CPU-s on CI's machine): its judges do, in their own
    processes, and the GPU it would spread over is asked only of a GPU judge."""
    copy = tmp_path / "tiny" / "level9"
    copy.mkdir(parents=True)
    for i in (1, 2, 3):
        shutil.copy(TINY / "level9" / "1_TinyLinear.py", copy / f"{i}_TinyLinear{i}.py")
    pytester.makeconftest(f"""
import os, sys
def pytest_sessionfinish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        open(os.path.join({str(tmp_path)!r}, "torch-" + worker), "w").write(str("torch" in sys.modules))
""")
    report = pytester.path / "kb.json"
    result = pytester.runpytest_subprocess(
        "--level", "9", "--dataset", str(tmp_path / "tiny"), "--solutions", "baseline", "-n", "2", f"--kb-report={report}"
    )
    result.assert_outcomes(passed=3)
    data = json.loads(report.read_text())
    assert sorted(r["problem"] for r in data["results"]) == ["L9-1_TinyLinear1", "L9-2_TinyLinear2", "L9-3_TinyLinear3"]
    result.stdout.fnmatch_lines(["*kernelbench summary: 3 judged*"])
    assert {p.name: p.read_text() for p in tmp_path.glob("torch-*")} == {"torch-gw0": "False", "torch-gw1": "False"}


def test_plugin_stays_out_of_ordinary_test_runs(pytester):
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    assert "kernelbench:" not in result.stdout.str() and "kernelbench summary" not in result.stdout.str()


def test_sigkilled_run_keeps_finished_results_in_the_report(pytester, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from filelock import Timeout

    from pytest_kernelbench.judge.locking import device_lock

    data = tmp_path / "two" / "level9"
    data.mkdir(parents=True)
    shutil.copy(TINY / "level9" / "1_TinyLinear.py", data / "1_First.py")
    shutil.copy(TINY / "level9" / "1_TinyLinear.py", data / "2_Second.py")
    sols = tmp_path / "sols" / "level9"
    sols.mkdir(parents=True)
    shutil.copy(BROKEN / "correct.py", sols / "1_First.py")
    shutil.copy(BROKEN / "timeout.py", sols / "2_Second.py")  # hangs: the run is killed while judging it
    report = tmp_path / "kb.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--level", "9", "--dataset", str(tmp_path / "two"),
         "--solutions", str(tmp_path / "sols"), "--device", "cpu", f"--kb-report={report}",
         "--kb-lock-dir", str(tmp_path / "locks")],
        cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if report.exists() and len(json.loads(report.read_text())["results"]) == 1:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the first result never reached the report")
        while time.monotonic() < deadline:  # until the hanging candidate's worker holds the device lock
            try:
                device_lock(tmp_path / "locks", "cpu").acquire(timeout=0).release()
            except Timeout:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the second candidate never took the device lock")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    data = json.loads(report.read_text())
    assert data["finished"] is False
    assert [(r["problem"], r["outcome"]) for r in data["results"]] == [("L9-1_First", "correct")]
    # The hanging candidate's worker (its own session, holding the device lock) dies with the run.
    with device_lock(tmp_path / "locks", "cpu").acquire(timeout=30):
        pass


def test_progress_lines_count_built_judged_failed(pytester):
    sols = solutions_with(pytester, {"1_TinyLinear": "runtime_error"})
    result = pytester.runpytest_subprocess(*TINY_ARGS, "--solutions", sols, "--kb-progress", "on", "--kb-progress-interval", "0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["kernelbench *1/1  built 1  judged 1  correct 0  failed 1 (runtime_error 1)*"])


# one process: the simpler way (the controller counts what it collected), left to --full
@pytest.mark.parametrize("workers", [pytest.param([], marks=pytest.mark.full), ["-n", "2"]], ids=["one process", "xdist"])
def test_progress_counts_the_selected_items_only(pytester, workers):
    args = ["--level", "mini", "--problems", "1-3", "--solutions", "baseline", "--device", "cpu", "--trials", "1",
            "--kb-progress", "on", "--kb-progress-interval", "0", "-k", "RowSum", "-p", "no:cacheprovider", *workers]  # fmt: skip
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    lines = [line for line in result.stdout.lines if line.startswith("kernelbench ") and "judged" in line]
    assert lines and all(" 1/1 " in line for line in lines), lines


def test_progress_is_quiet_under_q_and_in_ci(pytester, monkeypatch):
    from pytest_kernelbench.report.progress import wanted

    args = (*TINY_ARGS, "--solutions", "baseline", "--kb-progress-interval", "0")
    monkeypatch.delenv("CI", raising=False)
    assert "judged 1" in pytester.runpytest_subprocess(*args).stdout.str()
    monkeypatch.setenv("CI", "true")
    assert "judged 1" not in pytester.runpytest_subprocess(*args).stdout.str()
    # the decision the two runs above took, for every case (-q is verbosity -1)
    assert wanted("auto", 0, {}) and not wanted("auto", -1, {}) and not wanted("auto", 0, {"CI": "true"})
    assert wanted("on", -1, {"CI": "true"}) and not wanted("off", 1, {})


@pytest.mark.parametrize(("worker", "gpus", "expected"), [
    ("gw0", 8, 0), ("gw7", 8, 7), ("gw9", 8, 1), ("gw3", 2, 1), ("gw4", 2, 0), ("gw5", 0, 0), ("", 8, 0),
])
def test_xdist_workers_spread_over_the_visible_gpus(monkeypatch, worker, gpus, expected):
    from pytest_kernelbench.plugin import _device_index

    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    if worker:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    assert _device_index() == expected


@pytest.mark.parametrize(("nodes", "tools", "imports_torch"), [
    (("/nonexistent/nvidiactl",), ("kb-no-such-tool",), False),
    (("/dev/null",), ("kb-no-such-tool",), True),  # a device node
    (("/nonexistent/nvidiactl",), ("sh",), True),  # no node yet, but the driver's tools (libcuda makes the nodes on first use)
])  # fmt: skip
def test_the_default_device_asks_torch_only_where_a_gpu_driver_shows(nodes, tools, imports_torch):
    """Without --device the judge takes cuda where torch sees one; on a machine without any sign of a GPU driver (its
    device nodes, kernel module or tools) that is cpu, decided without importing torch in the driving process (seconds;
    the judges import it themselves)."""
    probe = (f"import sys; from pytest_kernelbench import config; config.GPU_DEVICE_NODES = {nodes!r}; "
             f"config.GPU_DRIVER_TOOLS = {tools!r}; print(config.pick_device(None), 'torch' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["cuda" if imports_torch and torch.cuda.is_available() else "cpu", str(imports_torch)]


def test_device_cuda_asked_for_always_asks_torch():
    """``--device cuda`` is never refused on the driver signs alone (a board whose nodes are not in the list): torch decides."""
    probe = ("import sys; from pytest_kernelbench import config; config.GPU_DEVICE_NODES = ('/nonexistent/nvidiactl',); "
             "config.GPU_DRIVER_TOOLS = ('kb-no-such-tool',); print(config.cuda_available(asked=True), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(torch.cuda.is_available()), "True"]


def test_junit_and_the_terminal_show_a_candidates_escape_sequences_as_text(pytester):
    """Issue 45: candidate text reaches a person escaped in pytest's failure text and in JUnit (what CI dashboards
    show): the red-team file that draws a green 'correct 48.000x' over its error."""
    folder = pytester.path / "sols" / "level9"
    folder.mkdir(parents=True)
    shutil.copy(TESTS / "adversarial" / "escape_sequences.py", folder / "1_TinyLinear.py")
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(*TINY_ARGS, "--solutions", str(pytester.path / "sols"), "--device", "cpu",
                                           f"--junitxml={junit}")  # fmt: skip
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "\\x1b[32mcorrect" in out and "\x1b[32m" not in out and "\x07" not in out
    xml = junit.read_text()
    failure = ET.parse(junit).find(".//failure")
    assert failure is not None and "runtime_error" in failure.get("message")
    assert "\\x1b[32mcorrect" in failure.get("message") + (failure.text or "") and "#x1B" not in xml and "\x1b" not in xml
