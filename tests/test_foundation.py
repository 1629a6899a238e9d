"""The repository's own wiring: the Lambda package imports, the CDK app synthesizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_lambda_entry_point_imports_and_is_callable() -> None:
    # GIVEN the handler string the construct configures
    module_name, function_name = ["order_consumer.handler", "handler"]
    # WHEN the Lambda runtime imports it
    module = __import__(module_name, fromlist=[function_name])
    # THEN it resolves to a callable taking (event, context)
    entry = getattr(module, function_name)
    assert callable(entry)
    assert entry.__wrapped__.__code__.co_varnames[:2] == ("event", "context")


def test_app_synthesizes_every_stage(tmp_path: Path) -> None:
    # GIVEN the CDK app as `cdk synth` runs it
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path)}
    # WHEN it is executed
    subprocess.run([sys.executable, "app.py"], cwd=REPO, env=env, check=True, capture_output=True)
    # THEN the cloud assembly holds a nested assembly per stage with at least one template
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    stages = {name for name, artifact in manifest["artifacts"].items() if artifact["type"] == "cdk:cloud-assembly"}
    assert "assembly-dev" in stages
    assert list(tmp_path.glob("assembly-dev/*.template.json"))
