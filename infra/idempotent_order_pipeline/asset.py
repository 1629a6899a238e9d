"""Where the consumer Lambda's code lives, from a source checkout or an installed distribution."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path

from aws_cdk import aws_lambda

from idempotent_order_pipeline import bytecode
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import CONSUMER_HANDLER
from idempotent_order_pipeline.core.sqs_function import RUNTIME

#: The Lambda entry point (contract with ``lambdas/order_consumer/handler.py``).
HANDLER = CONSUMER_HANDLER

#: The bytecode tag of the functions' runtime (``python3.14`` -> ``cpython-314``). The asset and the
#: subscriber's layer ship ``__pycache__/<module>.cpython-314.pyc``, compiled by that Python in
#: checked-hash mode (``make bytecode``; ``make test`` checks it is fresh), so that a cold start in
#: Lambda's read-only code directory loads bytecode instead of compiling every module it imports.
RUNTIME_BYTECODE_TAG = "cpython-" + RUNTIME.name.removeprefix("python").replace(".", "")

#: CDK glob patterns, the last match deciding (``!`` keeps): left out so that the asset's hash depends
#: on the code only (build metadata, the bytecode the tests' own Pythons write beside the sources),
#: kept: the runtime's bytecode (of which :func:`exclude_patterns` drops any that is not checked-hash).
ASSET_EXCLUDES = ("*.egg-info", "*.pyc", f"!*.{RUNTIME_BYTECODE_TAG}.pyc")


def excluded(path: Path) -> bool:
    """Whether the file or directory at ``path`` stays out of the asset: :data:`ASSET_EXCLUDES` (CDK's
    glob rule, the last match winning), and the runtime's bytecode unless checked-hash
    (:func:`idempotent_order_pipeline.bytecode.usable`)."""
    verdict = False
    for pattern in ASSET_EXCLUDES:
        if fnmatchcase(path.name, pattern.removeprefix("!")):
            verdict = not pattern.startswith("!")
    return verdict or (path.suffix == ".pyc" and path.is_file() and not bytecode.usable(path))


def exclude_patterns(root: Path) -> list[str]:
    """``exclude`` for an asset of ``root``: :data:`ASSET_EXCLUDES`, then each runtime ``.pyc`` found
    there that is not checked-hash (e.g. rewritten by ``pip install`` on python3.14), by its path."""
    unusable = [
        path.relative_to(root).as_posix()
        for path in sorted(root.rglob(f"__pycache__/*.{RUNTIME_BYTECODE_TAG}.pyc"))
        if not bytecode.usable(path)
    ]
    return [*ASSET_EXCLUDES, *unusable]


def copy_ignore(directory: str, names: Iterable[str]) -> set[str]:
    """The same rule as ``shutil.copytree``'s ``ignore``: a copy holds what the asset would."""
    return {name for name in names if excluded(Path(directory) / name)}


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
