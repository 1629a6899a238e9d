from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_entry
from tests.compat.released import V0_2_0, ReleasedFunctions, released_functions
from tests.consumer.harness import World
from tests.ops.conftest import OpsWorld


@pytest.fixture
def world() -> Iterator[World]:
    """The consumer tests' moto world: tables, topic, DLQ, subscriber, the current handler wired to them."""
    with mock_aws():
        yield World()
    handler_module.configure()


@pytest.fixture
def ops() -> Iterator[OpsWorld]:
    """The operator tooling's world (the pending index, the stack the CLI reads), inside ``mock_aws``."""
    with mock_aws():
        yield OpsWorld()
    handler_module.configure()
    reconciler_entry.configure()


@pytest.fixture
def v0_2_0(ops: OpsWorld) -> Iterator[ReleasedFunctions]:
    """0.2.0's consumer and reconciler (reconcile_after 0) on the same tables, topic and DLQ, in a child process."""
    with released_functions(V0_2_0, {**ops.env, "RECONCILE_AFTER_SECONDS": "0"}, ops.board.lock) as functions:
        yield functions
