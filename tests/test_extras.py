"""The plugin needs no extra: litellm (the `agent` extra) is imported only by a search with a real model."""

import subprocess
import sys

import pytest

from helpers import REPO, TINY_PROBLEM

# litellm made unimportable in the child, as where it is not installed
WITHOUT_LITELLM = "import sys; sys.modules['litellm'] = None; sys.argv[0] = {name!r}; {call}"


def run_without_litellm(name, call, *args):
    code = WITHOUT_LITELLM.format(name=name, call=call)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_litellm_is_in_the_agent_and_test_extras_only():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not any(dep.startswith("litellm") for dep in project["dependencies"])
    extras = project["optional-dependencies"]
    assert any(dep.startswith("litellm") for dep in extras["agent"]) and any(dep.startswith("litellm") for dep in extras["test"])


def test_the_plugin_collects_without_litellm():
    done = run_without_litellm("pytest", "import pytest; sys.exit(pytest.main(sys.argv[1:]))", "--collect-only", "-q", "--level",
                               "mini", "-p", "no:cacheprovider")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10 tests collected" in done.stdout


def test_a_search_with_a_real_model_without_litellm_is_one_line():
    done = run_without_litellm("kbagent", "from kbagent.cli import entry; entry()", "search", str(TINY_PROBLEM), "--model",
                               "openai/gpt-4o", "--api-key", "sk-x", "--device", "cpu")  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == ("error: --model openai/gpt-4o: litellm is not installed here; pip install "
                                   "'pytest-kernelbench[agent]' (or a scripted/ model, which needs none)")  # fmt: skip
