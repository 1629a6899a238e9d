"""The construct as a user gets it: installed from the distribution, imported by an app outside the repo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.infra.synth import REPO

# What the distribution is built from (pyproject.toml's package-dir); everything else stays behind.
DISTRIBUTION_SOURCES = ("pyproject.toml", "README.md", "infra", "lambdas")
THROWAWAY_APP = textwrap.dedent(
    """
    import json
    import sys

    import aws_cdk as cdk

    import idempotent_order_pipeline
    from idempotent_order_pipeline import IdempotentOrderPipeline
    from idempotent_order_pipeline.asset import lambda_asset_path

    app = cdk.App(outdir=sys.argv[1])
    stack = cdk.Stack(app, "ShopStack")
    IdempotentOrderPipeline(stack, "Orders", fifo=True)
    app.synth()
    print(json.dumps({"module": idempotent_order_pipeline.__file__, "asset": str(lambda_asset_path())}))
    """
)


def test_installed_package_synthesizes_in_an_app_outside_the_repo(tmp_path: Path) -> None:
    # GIVEN the distribution built from a copy of the sources and installed into a fresh directory
    source = tmp_path / "source"
    source.mkdir()
    for name in DISTRIBUTION_SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(
                REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
            )
        else:
            shutil.copy2(REPO / name, source / name)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
    subprocess.run(  # noqa: S603  (our interpreter, our temporary paths)
        [*pip, "--target", str(site), str(source)],
        check=True,
        capture_output=True,
    )
    # AND a throwaway CDK app in a directory of its own
    app_dir = tmp_path / "shop-app"
    app_dir.mkdir()
    (app_dir / "app.py").write_text(THROWAWAY_APP)
    outdir = app_dir / "cdk.out"
    environment = {**os.environ, "PYTHONPATH": str(site), "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1"}
    # WHEN the app imports the construct and synthesizes
    completed = subprocess.run(  # noqa: S603  (our interpreter, our temporary paths)
        [sys.executable, "app.py", str(outdir)],
        cwd=app_dir,
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    # THEN the construct came from the installed package, not the repository
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    assert Path(found["module"]).is_relative_to(site)
    assert Path(found["asset"]) == site / "idempotent_order_pipeline" / "_lambda_asset"
    # AND the function's asset is the installed Lambda code, handler included
    template = json.loads((outdir / "ShopStack.template.json").read_text())
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert [f["Properties"]["Handler"] for f in functions] == ["order_consumer.handler.handler"]
    asset_hash = functions[0]["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    staged = outdir / f"asset.{asset_hash}"
    assert (staged / "order_consumer" / "handler.py").is_file()
    assert (staged / "order_events" / "keys.py").is_file()
    assert not list(staged.rglob("__pycache__"))
