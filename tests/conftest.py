"""Settings every test process needs before any product module is imported."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import botocore.loaders
import botocore.session
import pytest

from tests.environment import TEST_ENVIRONMENT

# No test may reach a real AWS account: dummy credentials and a fixed region for boto3 and moto.
os.environ.update(TEST_ENVIRONMENT)
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)


class _SearchPaths(list[str]):
    """A loader's search paths, to which each new boto3 session appends its own data path only once."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


_LOADERS: dict[str | None, botocore.loaders.Loader] = {}


def _shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
    """One botocore data loader per data path for the whole test process.

    The code under test builds a boto3 session per CLI run, consumer or world, and each session's
    loader parses the same service models again (a third of the operator CLI tests' time). Sharing
    the loader shares its cache, as clients of one session already share it; the models are static.
    """
    if search_path_string not in _LOADERS:
        loader = _create_loader(search_path_string)
        loader._search_paths = _SearchPaths(loader.search_paths)  # type: ignore[attr-defined]
        _LOADERS[search_path_string] = loader
    return _LOADERS[search_path_string]


_create_loader = botocore.session.create_loader
botocore.session.create_loader = _shared_loader  # type: ignore[assignment]


#: The order the tiers start in: the longest first, so that two workers end together (whole files go
#: to a worker in collection order). The walk-through alone runs 2-3 minutes: it starts first.
_LONGEST_FILE = "tests/test_adoption_guide.py"
_TIER_ORDER = ("e2e", "slow")


#: Set by ``make test`` to ``python3.14`` when ``make test-runtime-fast`` runs the functions' fast tests there.
RUN_ON_RUNTIME_VARIABLE = "FUNCTION_FAST_TESTS_RUN_ON_RUNTIME"


def _ran_on_the_runtime(item: pytest.Item) -> bool:
    """A fast function test (``tools/runtime_python.py``'s selection), which make test runs on python3.14."""
    from tools.runtime_python import FUNCTION_TESTS

    in_function_tests = any(
        item.nodeid == path or item.nodeid.startswith(f"{path}/") or item.nodeid.startswith(f"{path}::")
        for path in FUNCTION_TESTS
    )
    return in_function_tests and not item.get_closest_marker("slow") and not item.get_closest_marker("e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The walk-through first, then end-to-end tests, then slow ones, then the rest, each in collected order.

    Under ``make test``, the functions' fast tests are left out when ``make test-runtime-fast`` runs them
    beside this run on python3.14, the functions' runtime (make test fails if they fail there); their slow
    tier runs here.
    """

    def tier(item: pytest.Item) -> int:
        if item.nodeid.startswith(_LONGEST_FILE):
            return -1
        return next((rank for rank, name in enumerate(_TIER_ORDER) if item.get_closest_marker(name)), len(_TIER_ORDER))

    from tools.runtime_python import RUNTIME_NAME

    if os.environ.get(RUN_ON_RUNTIME_VARIABLE) == RUNTIME_NAME:
        elsewhere = {item.nodeid for item in items if _ran_on_the_runtime(item)}
        if elsewhere:
            config.hook.pytest_deselected(items=[item for item in items if item.nodeid in elsewhere])
            items[:] = [item for item in items if item.nodeid not in elsewhere]
    items.sort(key=tier)


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    """One import root: the Lambda asset is loaded only as ``idempotent_order_pipeline._lambda_asset``.

    A module loaded under two names gives two classes of the same error, and ``isinstance`` lies; so a
    test process that imported ``order_consumer`` (or the former ``order_events``) as a top-level
    package fails the run. Processes that emulate Lambda load it top-level in their own process.
    """
    import sys

    stray = sorted(name for name in sys.modules if name.split(".")[0] in ("order_consumer", "order_events"))
    if stray:
        print(f"\nthe Lambda asset was imported under a second root in the test process: {stray[:5]}")
        session.exitstatus = 1  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _only_slow_tests_start_processes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that starts a process (a subprocess, a fork, Node, the CDK CLI, checkov) is marked ``slow``.

    ``make test-fast`` deselects ``slow`` and ``e2e``; so that it stays fast, a test without either
    marker fails as soon as it starts a process. jsii's own Node runtime (started at the first
    ``aws_cdk`` import) is the exception: it is started once per test process, not per test.
    """
    if request.node.get_closest_marker("slow") or request.node.get_closest_marker("e2e"):
        yield
        return

    def refuse(what: str) -> None:
        pytest.fail(f"{request.node.nodeid} starts a process ({what}): mark it @pytest.mark.slow", pytrace=False)

    execute_child: Callable[..., Any] = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def guarded_execute_child(popen: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> Any:
        if not _called_from_jsii():
            refuse(repr(args))
        return execute_child(popen, args, *rest, **kwargs)

    def guarded_fork() -> int:
        refuse("os.fork")
        raise AssertionError("unreachable")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", guarded_execute_child)
    monkeypatch.setattr(os, "fork", guarded_fork)
    yield


@pytest.fixture(autouse=True)
def _moto_runs_partiql_updates() -> None:
    """Every test that uses moto runs with the stand-in's PartiQL fix (``moto_patches`` point 7): the
    functions' sent marks are PartiQL UPDATEs, whose failed conditions moto 5.2.5 alone reports as
    successes. ``tests/sandbox/test_moto_patches.py`` reverts it inside the tests that show moto alone."""
    if "moto" in sys.modules:
        from idempotent_order_pipeline.sandbox import moto_patches

        moto_patches.apply_partiql_fix()


_SIGNING_KEYS: list[Any] = []


def _one_signing_key(subscription: object) -> Any:
    """The RSA key moto signs every SNS delivery of the test process with: generated at the first delivery."""
    if not _SIGNING_KEYS:
        from cryptography.hazmat.primitives.asymmetric import rsa

        _SIGNING_KEYS.append(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    return _SIGNING_KEYS[0]


@pytest.fixture(autouse=True)
def _moto_signs_with_one_key() -> None:
    """moto signs each SNS delivery with a 2048-bit RSA key it generates for each subscription (about 50 ms
    of CPU each: a world per crash point of the reconciler's crash-at-every-call test makes over 100); here
    the test process's subscriptions share one key. Each message still carries a signature and the
    certificate that verifies it, published as moto publishes it; no test (and no code under test) reads
    either."""
    if "moto" in sys.modules:
        from moto.sns import models

        models.Subscription.private_key = _one_signing_key  # type: ignore[method-assign, assignment]


@pytest.fixture(autouse=True)
def _moto_index_has_no_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reconcilers built in a test read the index up to ``reconcile_after`` itself: moto's index has no
    propagation lag to allow for, so a record older than the threshold is found whatever
    ``INDEX_PROPAGATION_MARGIN_SECONDS`` is. The tests of the margin pass ``index_margin_seconds``
    (tests/reconciler/test_checkpoints.py); the reconciler's default is checked there too."""
    from idempotent_order_pipeline._lambda_asset.order_consumer import reconciliation

    monkeypatch.setattr(reconciliation, "INDEX_PROPAGATION_MARGIN_SECONDS", 0)


def _called_from_jsii() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("jsii."):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@pytest.fixture(scope="session")
def distributions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel of this checkout, built once per run (:func:`tests.sources.shared_distributions`).

    Under pytest-xdist, the workers' base temporary directories share a parent: the first worker to ask
    builds there and the others reuse the build.
    """
    from tests.sources import shared_distributions

    base = tmp_path_factory.getbasetemp()
    return shared_distributions(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """What the consumer's and reconciler's Powertools logger writes (its handler holds the real stdout,
    out of capsys' reach)."""
    from idempotent_order_pipeline._lambda_asset.order_consumer.observability import logger

    stream = io.StringIO()
    registered = logger.registered_handler
    assert isinstance(registered, logging.StreamHandler)
    # Swapped without setStream, which flushes the stream it replaces: in a process that runs pytest
    # more than once (mutmut), that is the first session's captured stdout, closed since.
    previous, registered.stream = registered.stream, stream
    yield stream
    registered.stream = previous
