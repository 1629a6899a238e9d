from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    CONSUMER_UPDATE_ATTRIBUTES,
    MARK_STATEMENT_ATTRIBUTES,
)
from tests.consumer.harness import World
from tests.dynamodb_requests import action_of, named_attributes, updates


@pytest.fixture
def make_world() -> Iterator[Callable[..., World]]:
    """Build a moto-backed world (tables, topic, DLQ, subscriber) with the handler wired to it.

    After the test, every UpdateItem the handler made in it must name only the attributes the
    consumer's role may update (``CONSUMER_UPDATE_ATTRIBUTES``, the list the construct's
    ``dynamodb:Attributes`` condition is made of), and every PartiQL statement of a
    BatchExecuteStatement only those its PartiQLUpdate statement allows (``MARK_STATEMENT_ATTRIBUTES``):
    a new attribute in an update or a statement fails here first.
    """
    worlds: list[World] = []

    def build(**options: Any) -> World:
        worlds.append(World(**options))
        return worlds[-1]

    with mock_aws():
        yield build
    handler_module.configure()
    allowed = {
        "dynamodb:UpdateItem": set(CONSUMER_UPDATE_ATTRIBUTES),
        "dynamodb:PartiQLUpdate": set(MARK_STATEMENT_ATTRIBUTES),
    }
    beyond = {
        name
        for world in worlds
        for operation, requests in world.board.requests.items()
        for request in requests
        for update in updates(operation, request)
        for name in named_attributes(update) - allowed[action_of(update)]
    }
    assert not beyond, f"the consumer updated attributes its role may not: {sorted(beyond)}"


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    return make_world()
