"""The stand-in tells the truth about the runtime (sandbox/runtimes.py).

Each function runs on the interpreter its runtime names when this machine has one, else on the
stand-in's own, and ``sandbox start``, ``sandbox status`` and the demo's report say which, naming the
function, its runtime and the interpreter. The fast tests give the finder a fake probe (no process);
the slow one runs a function on another interpreter found here (the repository's cached python3.14
chroot, or pyenv's), with boto3 from the SDK directory, not from the stand-in's environment.
"""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.sandbox import demo, report
from idempotent_order_pipeline.sandbox.function import DeployedFunction
from idempotent_order_pipeline.sandbox.lambda_runtime import FunctionProcess
from idempotent_order_pipeline.sandbox.runtimes import (
    CHROOT_VARIABLE,
    LAMBDA_PYTHON_RUNTIMES,
    Interpreter,
    Interpreters,
    RuntimeChoice,
    Runtimes,
    compiled_modules,
    python_variable,
    runtime_version,
    sdk_distributions,
)
from idempotent_order_pipeline.sandbox.server import Endpoint

OWN = Interpreter((3, 11), "/opt/stand-in/bin/python")
REPO = Path(__file__).resolve().parents[2]


def _prober(answers: dict[str, Interpreter]) -> Any:
    """A probe that knows which command runs which interpreter (None: it does not run)."""

    def probe(command: list[str], *, chroot: str | None = None) -> Interpreter | None:
        return answers.get(command[-1])

    return probe


def _interpreters(tmp_path: Path, answers: dict[str, Interpreter], **environ: str) -> Interpreters:
    """A finder that sees only ``tmp_path``'s PATH and pyenv, and the variables given."""
    environment = {"PATH": str(tmp_path / "bin"), "PYENV_ROOT": str(tmp_path / "pyenv"), **environ}
    return Interpreters(environ=environment, own=OWN, prober=_prober(answers))


def test_runtime_names_give_their_version_and_their_variable() -> None:
    # GIVEN Lambda's Python runtimes  WHEN their version and variable are derived
    # THEN python3.14 is 3.14, its variable ORDER_PIPELINE_SANDBOX_PYTHON_3_14; nodejs is no Python
    assert runtime_version("python3.14") == (3, 14)
    assert python_variable("python3.14") == "ORDER_PIPELINE_SANDBOX_PYTHON_3_14"
    assert runtime_version("nodejs22.x") is None
    assert LAMBDA_PYTHON_RUNTIMES[-1] == "python3.14"


def test_without_a_matching_interpreter_the_function_runs_on_the_stand_ins_own_and_the_line_says_so(
    tmp_path: Path,
) -> None:
    # GIVEN a machine with no python3.14 (nothing on PATH, no pyenv, no variable)
    interpreters = _interpreters(tmp_path, {})
    # WHEN the interpreter of a python3.14 function is chosen
    choice = interpreters.choose("python3.14")
    # THEN it is the stand-in's own, and the line names the function, its runtime, the interpreter and why
    assert choice.interpreter == OWN
    assert not choice.matches
    assert choice.line("Orders-Consumer") == (
        "function Orders-Consumer (python3.14) runs on python3.11 (/opt/stand-in/bin/python): no python3.14 found"
    )
    assert choice.summary() == (
        "runtime python3.14: its functions run on python3.11 (/opt/stand-in/bin/python): no python3.14 found"
    )
    # AND a function of the stand-in's own version runs on it, matching
    assert (
        interpreters.choose("python3.11").line("F")
        == "function F (python3.11) runs on python3.11 (/opt/stand-in/bin/python)"
    )


def test_the_variable_comes_first_and_one_that_runs_another_version_is_named(tmp_path: Path) -> None:
    # GIVEN ORDER_PIPELINE_SANDBOX_PYTHON_3_14 naming a python3.14, and _3_13 naming a 3.12
    python314 = Interpreter((3, 14), "/opt/py314/bin/python3.14")
    python312 = Interpreter((3, 12), "/opt/py312/bin/python3.12")
    interpreters = _interpreters(
        tmp_path,
        {"/opt/py314/bin/python3.14": python314, "/opt/py312/bin/python3.12": python312},
        ORDER_PIPELINE_SANDBOX_PYTHON_3_14="/opt/py314/bin/python3.14",
        ORDER_PIPELINE_SANDBOX_PYTHON_3_13="/opt/py312/bin/python3.12",
    )
    # WHEN the interpreters of python3.14 and python3.13 functions are chosen
    chosen, wrong = interpreters.choose("python3.14"), interpreters.choose("python3.13")
    # THEN python3.14's is the one named, matching
    assert (chosen.interpreter, chosen.found_by, chosen.matches) == (
        python314,
        "ORDER_PIPELINE_SANDBOX_PYTHON_3_14",
        True,
    )
    assert chosen.line("F") == "function F (python3.14) runs on python3.14 (/opt/py314/bin/python3.14)"
    # AND python3.13's falls back to the stand-in's own, saying what the variable runs
    assert wrong.interpreter == OWN
    assert wrong.reason == "ORDER_PIPELINE_SANDBOX_PYTHON_3_13=/opt/py312/bin/python3.12 runs python3.12"


def test_path_then_pyenvs_newest_are_found(tmp_path: Path) -> None:
    # GIVEN python3.13 on PATH, and pyenv's 3.12.1 and 3.12.10 (no 3.12 on PATH)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3.13").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "python3.13").chmod(0o755)
    answers = {str(tmp_path / "bin" / "python3.13"): Interpreter((3, 13), "/usr/bin/python3.13")}
    for patch in ("1", "10"):
        executable = tmp_path / "pyenv" / "versions" / f"3.12.{patch}" / "bin" / "python3.12"
        executable.parent.mkdir(parents=True)
        executable.write_text("")
        answers[str(executable)] = Interpreter((3, 12), str(executable))
    interpreters = _interpreters(tmp_path, answers)
    # WHEN the interpreters of python3.13 and python3.12 functions are chosen
    # THEN PATH's python3.13 and pyenv's newest 3.12 run them
    assert (interpreters.choose("python3.13").found_by, interpreters.choose("python3.13").matches) == ("PATH", True)
    assert interpreters.choose("python3.12").interpreter.executable.endswith("3.12.10/bin/python3.12")
    assert interpreters.choose("python3.12").found_by == "pyenv"


def test_an_sdk_with_compiled_modules_keeps_functions_on_the_stand_ins_own(tmp_path: Path) -> None:
    # GIVEN a python3.14 named, and an SDK that would not import on it
    interpreters = _interpreters(
        tmp_path,
        {"/opt/py314/bin/python3.14": Interpreter((3, 14), "/opt/py314/bin/python3.14")},
        ORDER_PIPELINE_SANDBOX_PYTHON_3_14="/opt/py314/bin/python3.14",
    )
    interpreters.foreign_refused = "the SDK has compiled modules for python3.11 (x.so)"
    # WHEN the interpreter of a python3.14 function is chosen
    choice = interpreters.choose("python3.14")
    # THEN it is the stand-in's own, and the line says why
    assert choice.interpreter == OWN
    assert choice.reason == (
        "python3.14 (/opt/py314/bin/python3.14) found, but the SDK has compiled modules for python3.11 (x.so)"
    )


def test_the_sdk_is_boto3_and_its_requirements_all_pure_python() -> None:
    # GIVEN the stand-in's environment (the sandbox extra)
    # WHEN the SDK a function gets is gathered
    names = {str(dist.metadata["Name"]).lower() for dist in sdk_distributions()}
    # THEN it is what Lambda's Python runtime provides, nothing of the stand-in (no moto), and pure Python
    assert names == {"boto3", "botocore", "jmespath", "python-dateutil", "s3transfer", "six", "urllib3"}
    assert compiled_modules(sdk_distributions()) == []


def test_a_chroot_binds_every_directory_the_function_reads_at_its_own_path(tmp_path: Path) -> None:
    # GIVEN an interpreter in a chroot
    interpreter = Interpreter((3, 14), "/usr/bin/python3.14", "/cache/python3.14-sid")
    # WHEN its command is built for a function's code, a layer inside it, and the SDK
    command = interpreter.command([tmp_path / "task", tmp_path / "task" / "layer", Path("/sdk")], cwd=tmp_path / "task")
    # THEN it runs in a private mount namespace, binds each outermost directory once, then chroots
    assert command[:5] == ["unshare", "--mount", "--propagation", "private", "sh"]
    root_at = command.index("/cache/python3.14-sid")
    assert command[root_at + 1] == "512m"  # its private /tmp: Lambda's default ephemeral storage
    count = int(command[root_at + 2])
    bound = command[root_at + 3 : root_at + 3 + count]
    assert bound[:2] == ["/sdk", str(tmp_path / "task")] or set(bound) >= {"/sdk", str(tmp_path / "task")}
    assert str(tmp_path / "task" / "layer") not in bound
    assert command[-3:] == ["env", f"--chdir={tmp_path / 'task'}", "/usr/bin/python3.14"]


# --- what start, status and the report say ---------------------------------------------------------


def _choice(matches: bool) -> RuntimeChoice:
    if matches:
        return RuntimeChoice("python3.14", Interpreter((3, 14), "/usr/bin/python3.14", "/cache/sid"), CHROOT_VARIABLE)
    return RuntimeChoice("python3.14", OWN, "the stand-in's own", "no python3.14 found")


def _running_state(tmp_path: Path, choice: RuntimeChoice) -> Path:
    """A state directory of a stand-in that runs (this process's pid) one mapping of a python3.14 function."""
    state = {
        "pid": os.getpid(),
        "endpoint": "http://localhost:1",
        "region": "eu-west-1",
        "layer": {"arn": "arn:aws:lambda:eu-west-1:123456789012:layer:p:1", "zip": "/x.zip", "sha256": "0"},
        "runtimes": [choice.as_dict()],
    }
    mapping = {
        "function": "Orders-Consumer",
        "queue": "http://localhost:1/123456789012/orders",
        "batch_size": 10,
        "invocations": 0,
        "function_errors": {},
        "interpreter": choice.as_dict("Orders-Consumer"),
    }
    (tmp_path / "state.json").write_text(json.dumps(state))
    (tmp_path / "status.json").write_text(json.dumps({"mappings": [mapping], "schedules": [], "problems": []}))
    return tmp_path


@pytest.mark.parametrize("matches", [True, False])
def test_status_and_start_name_each_function_its_runtime_and_its_interpreter(tmp_path: Path, matches: bool) -> None:
    # GIVEN a stand-in running a python3.14 function, on python3.14 or not
    choice = _choice(matches)
    state_dir = _running_state(tmp_path, choice)
    line = choice.line("Orders-Consumer")
    # WHEN its status is asked, and it is started again
    status = CliRunner().invoke(cli, ["sandbox", "--state-dir", str(state_dir), "status"])
    start = CliRunner().invoke(cli, ["sandbox", "--state-dir", str(state_dir), "start"])
    # THEN status has the function's line
    assert status.exit_code == 0, status.output
    assert f"  {line}\n" in status.output
    # AND start says which interpreter runs python3.14's functions, then the function's line, the env file last
    assert start.exit_code == 0, start.output
    lines = start.output.splitlines()
    assert lines[0].startswith("already running: ")
    assert choice.summary() in lines
    assert line in lines
    assert lines[-1] == str(state_dir / "sandbox.env")
    expected = "runs on python3.14 (/usr/bin/python3.14 in the chroot /cache/sid)" if matches else "no python3.14 found"
    assert expected in line


def test_the_report_names_each_function_and_marks_one_not_on_its_runtime(tmp_path: Path) -> None:
    # GIVEN the stand-in's status: one function on its runtime's Python, one not
    status = {
        "mappings": [{"function": "Orders-Consumer", "interpreter": _choice(True).as_dict("Orders-Consumer")}],
        "schedules": [{"function": "Orders-Reconciler", "interpreter": _choice(False).as_dict("Orders-Reconciler")}],
    }
    # WHEN the report's lines are made
    lines = [report.interpreter_line(found) for found in demo.interpreters(status)]
    # THEN each function has its line, the one not on its runtime's Python in yellow
    assert lines == [
        f"runtime    {_choice(True).line('Orders-Consumer')}",
        f"[yellow]runtime[/]    {_choice(False).line('Orders-Reconciler')}",
    ]


# --- a function on another interpreter ---------------------------------------------------------------

HANDLER = """
import sys

import boto3


def handler(event, context):
    return {"version": list(sys.version_info[:2]), "boto3": boto3.__file__, "executable": sys.executable}
"""


def _repository_chroot() -> Path | None:
    """The python3.14 chroot make test-runtime caches (tools/runtime_python.py), when it is there."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = base / "idempotent-order-pipeline" / "python3.14-sid"
    return root if (root / ".ready").exists() else None


def _foreign_runtime(interpreters: Interpreters) -> str | None:
    """The newest of Lambda's Python runtimes that an interpreter other than the stand-in's own runs here."""
    for runtime in reversed(LAMBDA_PYTHON_RUNTIMES):
        choice = interpreters.choose(runtime)
        if choice.matches and choice.interpreter.version != interpreters.own.version:
            return runtime
    return None


@pytest.mark.slow
def test_a_function_runs_on_its_runtimes_interpreter_with_boto3_from_the_sdk(tmp_path: Path) -> None:
    # GIVEN this machine's interpreters (with the repository's python3.14 chroot, when make test-runtime made it)
    chroot = _repository_chroot()
    environ = {**os.environ, **({CHROOT_VARIABLE: str(chroot)} if chroot else {})}
    runtimes = Runtimes(tmp_path, Interpreters(environ=environ))
    runtime = _foreign_runtime(runtimes.interpreters) or "python3.14"
    runtime_of = runtimes.for_runtime(runtime)
    # AND a function of that runtime whose handler reports its Python and where boto3 came from
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("probe.py", HANDLER)
    function = DeployedFunction(
        name="probe",
        arn="arn:aws:lambda:eu-west-1:123456789012:function:probe",
        handler="probe.handler",
        runtime=runtime,
        timeout_seconds=30,
        memory_mb=128,
        environment={},
        code_sha256="-",
        code_zip=code.getvalue(),
    )
    task_dir, layer_dirs = function.unpack(tmp_path / "function")
    environment = FunctionProcess(
        function,
        Endpoint(url="http://localhost:1", region="eu-west-1"),
        task_dir,
        layer_dirs,
        tmp_path / "f.log",
        runtime_of,
    )
    try:
        # WHEN it is invoked
        invocation = environment.invoke({})
    finally:
        environment.stop()
    # THEN it ran on the interpreter chosen for its runtime, with boto3 from the SDK directory
    assert invocation.error is None, (invocation.error, (tmp_path / "f.log").read_text())
    assert tuple(invocation.payload["version"]) == runtime_of.choice.interpreter.version
    assert Path(invocation.payload["boto3"]).is_relative_to(runtime_of.sdk_dir)
    if runtime_of.choice.matches:
        # AND that is the runtime's own Python (the chroot's python3.14, or pyenv's), not the stand-in's
        assert tuple(invocation.payload["version"]) == runtime_version(runtime)
        assert runtime_of.choice.interpreter.version != (sys.version_info[0], sys.version_info[1])
    else:
        # AND where no other interpreter exists, the stand-in's own ran it, and the line says so
        assert runtime_of.choice.line("probe").endswith(f"no {runtime} found")
