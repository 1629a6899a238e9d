"""The stand-in's paths into this repository, from where its modules live (``infra/idempotent_order_pipeline/sandbox``).

``make demo`` and the e2e tier deploy the repository's ``app.py`` with the CDK CLI that ``npm ci``
installed at the root; the stand-in's processes put the directory holding the package first on
their path; the brownfield app does the same for itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from idempotent_order_pipeline.sandbox import deploy, paths

REPO = Path(__file__).resolve().parents[2]


def test_the_repository_root_is_where_app_py_and_the_cdk_cli_are() -> None:
    # GIVEN the stand-in's idea of the repository root WHEN compared THEN it is the root
    assert deploy.REPO_ROOT == REPO
    assert (deploy.REPO_ROOT / "app.py").is_file()
    assert deploy.CDK_CLI == REPO / "node_modules" / ".bin" / "cdk"


def test_the_stand_ins_processes_find_the_package_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no PYTHONPATH WHEN the stand-in builds its processes' path THEN it is the directory holding the package
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert (Path(paths.python_path()) / "idempotent_order_pipeline" / "__init__.py").is_file()


def test_the_brownfield_app_puts_the_directory_holding_the_package_on_its_path() -> None:
    # GIVEN the brownfield app's path insert, read from its source
    app = REPO / "infra" / "idempotent_order_pipeline" / "sandbox" / "brownfield_app" / "app.py"
    [insert] = [node for node in ast.walk(ast.parse(app.read_text())) if isinstance(node, ast.Subscript)]
    # WHEN evaluated for the app's own file THEN it is infra/, which holds the package
    parents = Path(app).resolve().parents[ast.literal_eval(insert.slice)]
    assert (parents / "idempotent_order_pipeline" / "__init__.py").is_file()
