"""The construct as a user gets it: the built wheel, installed into an empty virtualenv, imported by an
app outside the repo that has packages of its own named like the Lambda's (``order_events``,
``order_consumer``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from idempotent_order_pipeline.keys import derive_event_id
from tests.infra.synth import REPO

# Builds the wheel and installs it into throwaway virtualenvs.
pytestmark = pytest.mark.slow

# What the distribution is built from; everything else stays behind.
DISTRIBUTION_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "infra")
THROWAWAY_APP = textwrap.dedent(
    """
    import json
    import sys

    import aws_cdk as cdk

    import order_events  # the app's own package, not the pipeline's
    import order_consumer
    import idempotent_order_pipeline
    from idempotent_order_pipeline import IdempotentOrderPipeline
    from idempotent_order_pipeline.asset import lambda_asset_path
    from idempotent_order_pipeline.producer import OrderPublisher, derive_event_id

    app = cdk.App(outdir=sys.argv[1])
    stack = cdk.Stack(app, "ShopStack")
    IdempotentOrderPipeline(stack, "Orders", fifo=True)
    app.synth()
    print(json.dumps({
        "module": idempotent_order_pipeline.__file__,
        "asset": str(lambda_asset_path()),
        "own": [order_events.OWNER, order_consumer.OWNER],
        "key": derive_event_id({"order_id": "o-1"}),
        "publisher": OrderPublisher.__module__,
    }))
    """
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the distribution's sources."""
    source = tmp_path_factory.mktemp("source")
    for name in DISTRIBUTION_SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(
                REPO / name,
                source / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
            )
        elif (REPO / name).is_file():
            shutil.copy2(REPO / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(  # noqa: S603  (our interpreter, our temporary paths)
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "-w",
            out,
            source,
        ],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("*.whl")
    return built


def test_wheel_adds_the_library_and_the_stand_in_as_top_level_packages(wheel: Path) -> None:
    # GIVEN the built wheel
    # WHEN its files are listed
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    # THEN the top-level packages are the library (the Lambda asset inside it) and the stand-in
    assert top_level == {"idempotent_order_pipeline", "order_pipeline_sandbox"}
    assert "idempotent_order_pipeline/_lambda_asset/order_consumer/handler.py" in names
    assert "idempotent_order_pipeline/_lambda_asset/order_consumer/contract/keys.py" in names
    assert {"order_pipeline_sandbox/standin.py", "order_pipeline_sandbox/supervisor.py"} <= set(names)
    # AND no development-only app of the repository comes along
    assert not [name for name in names if "brownfield_app" in name]


def test_installed_wheel_synthesizes_beside_colliding_packages(wheel: Path, tmp_path: Path) -> None:
    # GIVEN an empty virtualenv that sees the test stack's dependencies but not this checkout
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)  # noqa: S603
    python = venv / "bin" / "python"
    venv_site = Path(
        subprocess.run(  # noqa: S603
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # A .pth line adds a directory only: the editable install's own .pth in it is not processed.
    (venv_site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # AND the wheel installed into it
    subprocess.run(  # noqa: S603
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel],
        check=True,
        capture_output=True,
    )
    # AND an app with packages of its own named order_events and order_consumer
    app_dir = tmp_path / "shop-app"
    for own in ("order_events", "order_consumer"):
        (app_dir / own).mkdir(parents=True)
        (app_dir / own / "__init__.py").write_text(f"OWNER = 'shop-app {own}'\n")
    (app_dir / "app.py").write_text(THROWAWAY_APP)
    outdir = app_dir / "cdk.out"
    environment = {
        key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    environment["JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION"] = "1"
    # WHEN the app imports the construct and the producer, and synthesizes
    completed = subprocess.run(  # noqa: S603  (our temporary interpreter and paths)
        [python, "app.py", str(outdir)], cwd=app_dir, env=environment, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    # THEN everything came from the installed wheel, and the app's own packages stayed its own
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    assert Path(found["module"]).is_relative_to(venv_site)
    assert Path(found["asset"]) == venv_site / "idempotent_order_pipeline" / "_lambda_asset"
    assert found["own"] == ["shop-app order_events", "shop-app order_consumer"]
    assert found["publisher"] == "idempotent_order_pipeline.producer"
    assert found["key"] == derive_event_id({"order_id": "o-1"})
    # AND the function's asset is the installed Lambda code, handler included
    template = json.loads((outdir / "ShopStack.template.json").read_text())
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    handlers = [f["Properties"]["Handler"] for f in functions]
    assert sorted(handlers) == ["order_consumer.handler.handler", "order_consumer.reconciler.handler"]
    functions = [f for f in functions if f["Properties"]["Handler"] == "order_consumer.handler.handler"]
    asset_hash = functions[0]["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    staged = outdir / f"asset.{asset_hash}"
    assert (staged / "order_consumer" / "handler.py").is_file()
    assert (staged / "order_consumer" / "contract" / "keys.py").is_file()
    assert not list(staged.rglob("__pycache__"))
    # AND the operator CLI's script is installed and starts
    cli = subprocess.run(  # noqa: S603
        [venv / "bin" / "order-pipeline", "--help"], cwd=app_dir, env=environment, capture_output=True, text=True
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert "redrive" in cli.stdout
