"""``order-pipeline sandbox start|status|stop``: the contract scripts outside this repository rely on.

``start`` returns once the stand-in is ready and prints the env file's path as its last line; a
second ``start`` says it runs already and prints the same path; ``status`` exits 1 when nothing
runs; ``stop`` stops the stand-in and everything it started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.sandbox import brownfield, paths
from idempotent_order_pipeline.sandbox.deploy import CDK_CLI, REPO_ROOT, DeployError, find_cdk_cli

REPO = Path(__file__).resolve().parents[2]


def order_pipeline(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, in ``cwd``, with this checkout's packages."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO / "infra"), str(REPO)])
    environment["ORDER_PIPELINE_SANDBOX_CDK"] = str(CDK_CLI)
    return subprocess.run(  # noqa: S603  (our interpreter, our CLI)
        [sys.executable, "-m", "idempotent_order_pipeline.cli", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_status_of_a_state_dir_where_nothing_runs_exits_1(tmp_path: Path) -> None:
    # GIVEN a state directory no stand-in ever used
    # WHEN its status is asked
    result = CliRunner().invoke(cli, ["sandbox", "--state-dir", str(tmp_path), "status"])
    # THEN it says nothing runs there, with exit code 1
    assert result.exit_code == 1
    assert result.output == f"not running (state dir {tmp_path})\n"


def test_status_of_a_running_stand_in_is_one_line_per_fact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a stand-in that runs (its process faked) and runs one mapping
    from idempotent_order_pipeline.sandbox import control

    class Running:
        pid, endpoint_url, region = 4242, "http://localhost:4566", "eu-west-1"

        def status(self) -> dict[str, object]:
            mapping = {"function": "consumer", "queue": "orders", "batch_size": 10, "invocations": 3}
            return {"mappings": [{**mapping, "function_errors": {}}], "schedules": [], "problems": []}

    monkeypatch.setattr(control, "running", lambda state: Running())
    # WHEN its status is asked
    result = CliRunner().invoke(cli, ["sandbox", "--state-dir", str(tmp_path), "status"])
    # THEN each fact is a line of its own: no line carries an escaped newline
    assert result.exit_code == 0, result.output
    assert "\\u000a" not in result.output
    assert result.output.splitlines() == [
        "running: http://localhost:4566 (region eu-west-1, pid 4242)",
        f"env file: {tmp_path / 'sandbox.env'}",
        f"log: {tmp_path / 'sandbox.log'}",
        "  consumer <- orders: batch 10, 3 invocation(s), 0 error(s)",
    ]


def test_the_cdk_cli_named_is_made_absolute_and_a_missing_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an executable named by a relative path, and a name that is no executable
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "cdk").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "cdk").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    # WHEN each is looked up
    # THEN the first comes back absolute (bootstrap runs it from another directory)
    assert find_cdk_cli("bin/cdk") == tmp_path / "bin" / "cdk"
    # AND the second is an error naming it and where it came from
    with pytest.raises(
        DeployError, match=r"'no-such-cdk' \(--cdk or \$ORDER_PIPELINE_SANDBOX_CDK\) is not an executable"
    ):
        find_cdk_cli("no-such-cdk")


@pytest.mark.e2e
def test_start_twice_status_stop(tmp_path: Path) -> None:
    # GIVEN a directory, its default state dir ./.order-pipeline-sandbox
    state_dir = tmp_path / ".order-pipeline-sandbox"
    try:
        # WHEN the stand-in is started there
        started = order_pipeline("sandbox", "start", cwd=tmp_path)
        # THEN it is ready, and the last line is the env file, which points the SDKs at it
        assert started.returncode == 0, started.stderr
        lines = started.stdout.strip().splitlines()
        assert lines[0].startswith("started: http://localhost:")
        env_file = Path(lines[-1])
        assert env_file == state_dir / "sandbox.env"
        exported = dict(line.removeprefix("export ").split("=", 1) for line in env_file.read_text().splitlines())
        assert exported["AWS_ENDPOINT_URL"] == lines[0].split()[1]
        assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"} <= set(exported)

        # WHEN it is started again
        again = order_pipeline("sandbox", "start", cwd=tmp_path)
        # THEN it says so, and names the same env file last
        assert again.returncode == 0, again.stderr
        assert again.stdout.startswith("already running: ")
        assert again.stdout.strip().splitlines()[-1] == str(env_file)

        # WHEN its status is asked
        status = order_pipeline("sandbox", "status", "--json", cwd=tmp_path)
        # THEN it runs, at that endpoint, and runs no function yet
        assert status.returncode == 0, status.stderr
        document = json.loads(status.stdout)
        assert (document["running"], document["endpoint"]) == (True, exported["AWS_ENDPOINT_URL"])
        assert (document["mappings"], document["schedules"]) == ([], [])
        pid = document["pid"]
    finally:
        # WHEN it is stopped
        stopped = order_pipeline("sandbox", "stop", cwd=tmp_path)
    # THEN it is gone, with its env file, and status says so
    assert stopped.stdout.startswith("stopped (pid ")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not env_file.exists()
    assert order_pipeline("sandbox", "status", cwd=tmp_path).returncode == 1


def test_the_stand_in_finds_this_checkouts_app_cli_and_package() -> None:
    # GIVEN the stand-in's package in this checkout (infra/idempotent_order_pipeline/sandbox)
    # WHEN it locates the repository, the pinned CDK CLI and the root it puts on the stand-in's PYTHONPATH
    package_root = Path(paths.python_path().split(os.pathsep)[0])
    brownfield_root = (brownfield.APP_DIR / "app.py").read_text()
    # THEN they are this checkout's root, its node_modules' CLI, and infra/ (which holds the package)
    assert REPO_ROOT == REPO
    assert CDK_CLI == REPO / "node_modules" / ".bin" / "cdk"
    assert package_root == REPO / "infra"
    assert (package_root / "idempotent_order_pipeline" / "__init__.py").exists()
    # AND the brownfield app puts that same directory first on its path
    assert "parents[3]" in brownfield_root
    assert Path(brownfield.APP_DIR / "app.py").resolve().parents[3] == REPO / "infra"
