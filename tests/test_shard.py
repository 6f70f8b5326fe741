"""--shard I/N: a deterministic split of the problems for fleets of CI runners."""

import pytest

from helpers import REPO
from pytest_kernelbench.errors import KernelBenchUsageError
from pytest_kernelbench.plugin import shard
from pytest_kernelbench.problems import problem_from_path

MINI = sorted((REPO / "problems" / "mini").glob("*.py"), key=lambda p: int(p.name.split("_")[0]))


def _problems():
    return [problem_from_path(p) for p in MINI]


def test_shards_cover_every_problem_once_and_are_stable():
    problems = _problems()
    shards = [shard(problems, f"{i}/3") for i in (1, 2, 3)]
    names = [p.name for part in shards for p in part]
    assert sorted(names) == sorted(p.name for p in problems) and len(names) == len(set(names))
    assert [p.problem_id for p in shards[1]] == [2, 5, 8]
    assert [p.name for p in shard(_problems(), "2/3")] == [p.name for p in shards[1]]


@pytest.mark.parametrize("spec", ["0/3", "4/3", "2", "a/b", "1/0"])
def test_bad_shard_names_the_expected_form(spec):
    with pytest.raises(KernelBenchUsageError, match=r"--shard .*expected I/N"):
        shard(_problems(), spec)


def test_shard_through_pytest(pytester):
    result = pytester.runpytest_subprocess("--collect-only", "-q", "--level", "mini", "--shard", "2/3", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*Lmini-2_RowSum*", "*Lmini-5_Conv2dReLU*", "*Lmini-8_MultiHeadAttention*", "3 tests collected*"])
