"""The repository's own wiring: the Lambda package imports, the CDK app synthesizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Each test runs a fresh interpreter: the asset root alone, then app.py as the CDK CLI runs it.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


LAMBDA_IMPORT = """
import json, sys
import order_consumer.handler, order_consumer.reconciler
names = ("order_consumer.handler", "order_consumer.reconciler")
entries = {name: getattr(sys.modules[name], "handler") for name in names}
print(json.dumps({
    "callable": {name: callable(entry) for name, entry in entries.items()},
    "arguments": {name: entry.__wrapped__.__code__.co_varnames[:2] for name, entry in entries.items()},
    "asset_modules": sorted(name for name in sys.modules if name.split(".")[0] in ("order_consumer", "order_events")),
    "library_loaded": any(name.startswith("idempotent_order_pipeline") for name in sys.modules),
}))
"""


def test_lambda_entry_points_import_from_the_asset_root_alone() -> None:
    # GIVEN a process that sees only the asset root (lambdas/) and the dependencies, as Lambda does
    env = {**os.environ, "PYTHONPATH": str(REPO / "lambdas"), "AWS_DEFAULT_REGION": "eu-west-1"}
    # WHEN the Lambda runtime imports both handler strings the construct configures
    completed = subprocess.run(  # noqa: S603 - this interpreter, this test's own code
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {str(REPO / 'lambdas')!r}); exec({LAMBDA_IMPORT!r})",
        ],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    found = json.loads(completed.stdout.splitlines()[-1])
    # THEN each resolves to a callable taking (event, context), from the one package order_consumer
    assert found["callable"] == {"order_consumer.handler": True, "order_consumer.reconciler": True}
    assert found["arguments"] == {
        "order_consumer.handler": ["event", "context"],
        "order_consumer.reconciler": ["event", "context"],
    }
    assert "order_consumer.contract.keys" in found["asset_modules"]
    assert not [name for name in found["asset_modules"] if name.startswith("order_events")]
    # AND nothing of the library (or this checkout's infra/) is needed to load it
    assert found["library_loaded"] is False


#: app.py run as `cdk synth` runs it (as __main__), then what it imported of moto, which a synth never needs.
APP_SYNTH = """
import json, runpy, sys
runpy.run_path("app.py", run_name="__main__")
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "moto")))
"""


def test_app_synthesizes_every_stage_without_importing_moto(tmp_path: Path) -> None:
    # GIVEN the CDK app as `cdk synth` runs it
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path)}
    # WHEN it is executed
    completed = subprocess.run(  # noqa: S603 - this interpreter, this test's own code
        [sys.executable, "-c", APP_SYNTH], cwd=REPO, env=env, check=True, capture_output=True, text=True
    )
    # THEN the cloud assembly holds a nested assembly per stage with at least one template
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    stages = {name for name, artifact in manifest["artifacts"].items() if artifact["type"] == "cdk:cloud-assembly"}
    assert "assembly-dev" in stages
    assert list(tmp_path.glob("assembly-dev/*.template.json"))
    # AND the synth loaded nothing of moto: the app imports the worked example's output names only, and
    # moto's CloudFormation with every backend it loads costs each synth seconds (make diff, each deploy)
    assert json.loads(completed.stdout.splitlines()[-1]) == []


LIBRARY_IMPORT = """
import json, sys
import idempotent_order_pipeline
from idempotent_order_pipeline import IdempotentOrderPipeline, IdempotentSubscriber, producer
import idempotent_order_pipeline.cli.commands
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "moto" or name.startswith(
    "idempotent_order_pipeline.sandbox"))))
"""


def test_importing_the_library_never_imports_the_stand_in_or_moto() -> None:
    # GIVEN a fresh interpreter with this checkout's library on its path
    env = {**os.environ, "PYTHONPATH": str(REPO / "infra")}
    # WHEN it imports the construct, the subscriber, the producer client and the operator CLI
    completed = subprocess.run(  # noqa: S603 - this interpreter, this test's own code
        [sys.executable, "-c", LIBRARY_IMPORT], cwd="/", env=env, capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr
    # THEN neither the stand-in (a subpackage) nor moto, which it patches, was imported
    assert json.loads(completed.stdout.splitlines()[-1]) == []
