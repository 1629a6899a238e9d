from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from tests.consumer.harness import World


@pytest.fixture
def make_world() -> Iterator[Callable[..., World]]:
    """Build a moto-backed world (tables, topic, DLQ, subscriber) with the handler wired to it."""
    with mock_aws():
        yield World
    handler_module.configure()


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    return make_world()
