from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from tests.consumer.harness import World


@pytest.fixture
def world() -> Iterator[World]:
    """The consumer tests' moto world: tables, topic, DLQ, subscriber, the current handler wired to them."""
    with mock_aws():
        yield World()
    handler_module.configure()
