"""docs/adopting.md ("Use it in your own app"), run as written: from an empty directory to the CLI on the endpoint.

The ``bash`` blocks of that page run unchanged, in order, in a temporary directory: the
install (the wheel built from this checkout as ``PIPELINE_SOURCE``), the two-pipeline app and its
``cdk synth``, ``make endpoint`` (in the background, as "another terminal"), then ``cdk deploy``
with the real CDK CLI and the operator CLI against the deployed stack, which has no outputs.

Offline: pip resolves the dependencies from this checkout's virtualenv (``PYTHONPATH``, no index),
npm prefers its cache. This is also the one end-to-end test of the CLI's discovery in a stack of
two pipelines deployed by the CDK CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import boto3
import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "adopting.md"
ENV_FILE = REPO / ".sandbox" / "endpoint.env"
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "infra")
ENDPOINT_TIMEOUT_SECONDS = 300
STEP_TIMEOUT_SECONDS = 900


def page_blocks() -> list[str]:
    """The ``bash`` code blocks of the page, in order."""
    return re.findall(r"```bash\n(.*?)```", PAGE.read_text(), re.S)


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    for name in SOURCES:
        if (REPO / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "order_pipeline_sandbox")
            shutil.copytree(REPO / name, source / name, ignore=ignore)
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    out = tmp_path / "dist"
    subprocess.run(  # noqa: S603  (our interpreter, our temporary paths)
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    [wheel] = out.glob("*.whl")
    return wheel


def dependencies_dir(tmp_path: Path) -> Path:
    """This venv's installed packages, minus this project and pip's own tooling: a stand-in index."""
    deps = tmp_path / "deps"
    deps.mkdir()
    skipped = ("idempotent_order_pipeline", "__editable__", "pip", "setuptools", "_distutils_hack", "distutils-")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.startswith(skipped) or entry.suffix == ".pth" or entry.name == "__pycache__":
            continue
        (deps / entry.name).symlink_to(entry)
    return deps


def run_block(block: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(  # noqa: S603  (bash running the page's own commands)
        ["bash", "-euo", "pipefail", "-c", block],  # noqa: S607
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_SECONDS,
    )
    assert completed.returncode == 0, f"$ {block}\n{completed.stdout[-3000:]}\n{completed.stderr[-4000:]}"
    return completed


def test_use_it_in_your_own_app_works_as_written(tmp_path: Path) -> None:
    # GIVEN the section's blocks: install, app + synth, the endpoint, deploy + CLI
    install, app, endpoint_command, operate = page_blocks()
    assert endpoint_command.split()[:2] == ["make", "-C"]
    assert endpoint_command.split()[-1] == "endpoint"
    # AND an environment as an adopter's, offline: the wheel of this checkout, no AWS settings
    env = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "PYTHON", "VIRTUAL_ENV"))}
    # The endpoint's terminal is a developer's in the clone: no adopter settings.
    clone_env = dict(env)
    env |= {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        "PIPELINE_SOURCE": build_wheel(tmp_path).as_uri(),
        "PIPELINE_REPO": str(REPO),
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONPATH": str(dependencies_dir(tmp_path)),
        "npm_config_prefer_offline": "true",
        "CDK_DISABLE_VERSION_CHECK": "1",
        "CDK_CLI_NOTICES": "false",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
        "CI": "true",
    }
    work = tmp_path / "work"
    work.mkdir()

    # WHEN the install block runs in an empty directory, then the app block in shop/
    run_block(install, work, env)
    shop = work / "shop"
    run_block(app, shop, env)
    # THEN the app synthesized both pipelines, the construct from the installed wheel
    template = json.loads((shop / "cdk.out" / "Shop.template.json").read_text())
    marks = [r.get("Metadata", {}).get("idempotent_order_pipeline") for r in template["Resources"].values()]
    assert sorted({mark["pipeline"] for mark in marks if mark}) == ["Orders", "Returns"]
    assert not template.get("Outputs")
    assert list((shop / ".venv").glob("lib/python*/site-packages/idempotent_order_pipeline/__init__.py"))

    # WHEN the endpoint runs ("another terminal") and the deploy-and-operate block runs in shop/
    ENV_FILE.unlink(missing_ok=True)
    server = subprocess.Popen(  # noqa: S603  (bash running the page's own command)
        ["bash", "-euo", "pipefail", "-c", endpoint_command],  # noqa: S607
        cwd=work,
        env={**clone_env, "PIPELINE_REPO": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + ENDPOINT_TIMEOUT_SECONDS
        while not ENV_FILE.exists():
            assert server.poll() is None, f"make endpoint exited: {server.stdout.read() if server.stdout else ''}"
            assert time.monotonic() < deadline, "the endpoint did not get ready"
            time.sleep(1)
        endpoint_url = re.search(r"AWS_ENDPOINT_URL=(\S+)", ENV_FILE.read_text())
        assert endpoint_url is not None
        completed = run_block(operate, shop, env)

        # THEN `pipelines` listed both, discovered from the deployed stack's template
        assert re.search(r"^Orders\n  queue +http", completed.stdout, re.M), completed.stdout
        assert re.search(r"^Returns\n  queue +http", completed.stdout, re.M), completed.stdout
        # AND each order went to its pipeline's queue
        assert completed.stdout.count("sent 1 of 1 order(s)") == 2, completed.stdout
        listing = run_block(f"source {ENV_FILE}\n.venv/bin/order-pipeline --stack Shop pipelines --json", shop, env)
        queues = {entry["id"]: entry["queue"] for entry in map(json.loads, listing.stdout.splitlines())}
        sqs = boto3.client(
            "sqs",
            endpoint_url=endpoint_url[1],
            region_name="eu-west-1",
            aws_access_key_id="sandbox",
            aws_secret_access_key="sandbox",
        )
        received = {
            name: [json.loads(m["Body"])["order_id"] for m in sqs.receive_message(QueueUrl=url).get("Messages", [])]
            for name, url in queues.items()
        }
        assert received == {"Orders": ["o-1"], "Returns": ["r-1"]}
        # AND the DLQ listing and the pending query ran against the right pipelines
        assert "0 shown of 0 read" in completed.stderr
        assert "0 record(s) pending" in completed.stderr
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    # AND stopping the endpoint removed its env file
    assert not ENV_FILE.exists()
