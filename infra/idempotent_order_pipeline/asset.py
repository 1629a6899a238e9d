"""Where the consumer Lambda's code lives, from a source checkout or an installed distribution."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_lambda

#: The Lambda entry point (contract with ``lambdas/order_consumer/handler.py``).
HANDLER = "order_consumer.handler.handler"

#: Left out of the asset so its hash depends on the code only: bytecode caches, and the egg-info an
#: editable install writes into ``lambdas/``.
ASSET_EXCLUDES = ("__pycache__", "*.pyc", "*.egg-info")

# An installed distribution ships the asset next to this module (pyproject.toml maps ``lambdas/``
# to ``idempotent_order_pipeline/_lambda_asset``); a source checkout has it at the repository root.
_INSTALLED_ASSET = Path(__file__).parent / "_lambda_asset"
_SOURCE_ASSET = Path(__file__).resolve().parents[2] / "lambdas"


def lambda_asset_path() -> Path:
    """The asset root holding ``order_consumer/`` and ``order_events/``."""
    return _INSTALLED_ASSET if _INSTALLED_ASSET.is_dir() else _SOURCE_ASSET


def lambda_code() -> aws_lambda.Code:
    """The consumer's code as a CDK asset (no bundling: its only dependency comes from a layer)."""
    return aws_lambda.Code.from_asset(str(lambda_asset_path()), exclude=list(ASSET_EXCLUDES))
