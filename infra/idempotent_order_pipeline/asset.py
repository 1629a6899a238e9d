"""Where the consumer Lambda's code lives, from a source checkout or an installed distribution."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_lambda

from idempotent_order_pipeline import bytecode
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import CONSUMER_HANDLER

# The asset's rule lives beside the bytecode tool (standard library only: the bench stages the asset
# without importing the CDK); re-exported here for the construct's modules.
from idempotent_order_pipeline.bytecode import ASSET_EXCLUDES, RUNTIME_BYTECODE_TAG, copy_ignore, excluded

__all__ = [
    "ASSET_EXCLUDES",
    "HANDLER",
    "RUNTIME_BYTECODE_TAG",
    "code_from",
    "copy_ignore",
    "exclude_patterns",
    "excluded",
    "lambda_asset_path",
    "lambda_code",
]

#: The Lambda entry point (contract with ``lambdas/order_consumer/handler.py``).
HANDLER = CONSUMER_HANDLER


def exclude_patterns(root: Path) -> list[str]:
    """``exclude`` for an asset of ``root``: :data:`ASSET_EXCLUDES`, then each runtime ``.pyc`` found
    there that is not checked-hash (e.g. rewritten by ``pip install`` on python3.14), by its path."""
    unusable = [
        path.relative_to(root).as_posix()
        for path in sorted(root.rglob(f"__pycache__/*.{RUNTIME_BYTECODE_TAG}.pyc"))
        if not bytecode.usable(path)
    ]
    return [*ASSET_EXCLUDES, *unusable]


def code_from(root: Path) -> aws_lambda.Code:
    """``root`` as a function's or layer's code: an asset without build metadata or foreign bytecode."""
    return aws_lambda.Code.from_asset(str(root), exclude=exclude_patterns(root))


# The asset root is a directory of this package, in a source checkout (where ``lambdas/`` at the
# repository root is a link to it) and in an installed distribution alike.
_ASSET_ROOT = Path(__file__).parent / "_lambda_asset"


def lambda_asset_path() -> Path:
    """The asset root holding the one asset package, ``order_consumer/``."""
    return _ASSET_ROOT


def lambda_code() -> aws_lambda.Code:
    """The consumer's code as a CDK asset (no bundling: its only dependency comes from a layer)."""
    return code_from(lambda_asset_path())
