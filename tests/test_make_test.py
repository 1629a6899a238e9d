"""make test runs the functions' fast tests once, on python3.14, and every other test on this venv's Python."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import RUN_ON_RUNTIME_VARIABLE
from tools import runtime_python
from tools.runtime_python import FUNCTION_TESTS, REPO

pytestmark = pytest.mark.slow  # collects in a pytest process of its own

#: A fast and a slow function test file, and a test file that is not a function test.
FILES = ("tests/consumer/test_call_budget.py", "tests/consumer/test_batch_memory.py", "tests/test_structure.py")


@functools.cache  # (a collection in a process of its own takes seconds; the tests compare the same ones)
def _collected(variable: str | None) -> tuple[str, ...]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", RUN_ON_RUNTIME_VARIABLE))}
    if variable is not None:
        env[RUN_ON_RUNTIME_VARIABLE] = variable
    completed = subprocess.run(  # noqa: S603 - this interpreter, this repository's tests
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *FILES],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return tuple(line for line in completed.stdout.splitlines() if "::" in line)


def test_beside_the_runtimes_run_only_the_slow_function_tests_and_the_rest_are_collected() -> None:
    # GIVEN the files collected as make test-fast does, and as make test does beside the runtime's run
    everything = _collected(None)
    after_runtime = _collected("python3.14")
    # THEN without the runtime's run every test is there; beside it, the fast function tests are left out,
    # the slow function tests and the other tests stay
    assert {line.split("::")[0] for line in everything} == set(FILES)
    left_out = set(everything) - set(after_runtime)
    assert left_out
    assert all(line.startswith("tests/consumer/test_call_budget.py::") for line in left_out)
    assert {line.split("::")[0] for line in after_runtime} == {FILES[1], FILES[2]}
    assert all(any(line.startswith(path) for path in FUNCTION_TESTS) for line in left_out)


def test_another_value_leaves_nothing_out() -> None:
    # GIVEN a value that does not name the runtime (a fallback Python ran the function tests)
    # THEN every test is collected
    assert _collected("python3.13") == _collected(None)


@pytest.mark.parametrize(("pytest_args", "recorded"), [([], "python3.14\n"), (["--", "-k", "deadline"], None)])
def test_runtime_prepare_records_python_3_14_only_when_every_fast_function_test_will_run_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pytest_args: list[str], recorded: str | None
) -> None:
    # GIVEN a runtime interpreter of the runtime's version (this Python, standing in)
    here = runtime_python.Interpreter("stand-in", runtime_python.RUNTIME_VERSION, (sys.executable,), str(REPO))
    monkeypatch.setattr(runtime_python, "interpreters", lambda build: [here])
    monkeypatch.setattr(runtime_python, "with_venv", lambda interpreter: interpreter)
    record = tmp_path / "runtime"
    # WHEN make test's runtime-prepare runs, with or without a pytest selection for the runtime's run
    status = runtime_python.main(["--prepare", "--record", str(record), *pytest_args])
    # THEN it records python3.14 only without a selection (a -k would run only some of the fast tests there)
    assert status == 0
    assert (record.read_text() if record.exists() else None) == recorded
