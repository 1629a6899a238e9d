"""Where the consumer Lambda's code lives, from a source checkout or an installed distribution."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_lambda

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import CONSUMER_HANDLER

#: The Lambda entry point (contract with ``lambdas/order_consumer/handler.py``).
HANDLER = CONSUMER_HANDLER

#: Left out of the asset so its hash depends on the code only: bytecode caches and build metadata.
ASSET_EXCLUDES = ("__pycache__", "*.pyc", "*.egg-info")

# The asset root is a directory of this package, in a source checkout (where ``lambdas/`` at the
# repository root is a link to it) and in an installed distribution alike.
_ASSET_ROOT = Path(__file__).parent / "_lambda_asset"


def lambda_asset_path() -> Path:
    """The asset root holding the one asset package, ``order_consumer/``."""
    return _ASSET_ROOT


def lambda_code() -> aws_lambda.Code:
    """The consumer's code as a CDK asset (no bundling: its only dependency comes from a layer)."""
    return aws_lambda.Code.from_asset(str(lambda_asset_path()), exclude=list(ASSET_EXCLUDES))
