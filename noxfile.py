"""nox sessions: `nox -s tests` (CI's run), `nox -s full` (also the tests marked full: every bundled solution's CPU
check, every variant CI proves once), `nox -s lint`, `nox -s bundled` (the main job on the bundled problems), and the
kernelbench verifiers environment's real rollouts under each verifiers line, each in its own venv (their `mcp` pins
differ): `nox -s verifiers03 verifiers04` (not in CI; they fetch uv's chat program's packages from the index)."""

import nox

nox.options.sessions = ["lint", "tests"]


def _install(session: nox.Session) -> None:
    # The pinned CPU build first; on a GPU machine install your CUDA build of torch instead.
    session.install("torch==2.13.0")
    session.install("-e", ".[test]")


@nox.session
def tests(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", "tests", "-n", "3", *session.posargs)  # .ci/run says why three


@nox.session
def full(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", "tests", "-n", "3", "--full", *session.posargs)


@nox.session
def bundled(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", "-v", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "pytest_kernelbench", "kbagent", "tests", "noxfile.py", "conftest.py")


def _rollout(session: nox.Session, verifiers: str) -> None:
    """A real rollout through verifiers' CLI on the CPU against a scripted OpenAI-compatible server on 127.0.0.1
    (tests/vf_rollout.py): the chat loop with the judge's feedback, then tool mode (run_kernel, finish)."""
    session.install("torch==2.13.0")
    session.install("-e", ".", verifiers, "uv")
    session.install("-e", "environments/kernelbench")
    session.run("python", "tests/vf_rollout.py", *session.posargs)


@nox.session(python="3.11")
def verifiers03(session: nox.Session) -> None:
    _rollout(session, "verifiers>=0.3,<0.4")


@nox.session(python="3.11")
def verifiers04(session: nox.Session) -> None:
    _rollout(session, "verifiers>=0.4,<0.5")
