"""nox sessions: `nox -s tests`, `nox -s lint`, `nox -s bundled` (the main job on the bundled problems)."""

import nox

nox.options.sessions = ["lint", "tests"]


def _install(session: nox.Session) -> None:
    # The pinned CPU build first; on a GPU machine install your CUDA build of torch instead.
    session.install("torch==2.13.0")
    session.install("-e", ".[test]")


@nox.session
def tests(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", "tests", "-n", "2", *session.posargs)


@nox.session
def bundled(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", "-v", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "pytest_kernelbench", "kbagent", "tests", "noxfile.py", "conftest.py")
