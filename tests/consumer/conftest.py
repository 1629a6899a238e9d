from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer import observability
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    CONSUMER_UPDATE_ATTRIBUTES,
    MARK_STATEMENT_ATTRIBUTES,
)
from tests.consumer.harness import World
from tests.dynamodb_requests import action_of, named_attributes, updates

#: How long a test's teardown waits for the record threads its invocations left running.
RECORD_THREADS_JOIN_S = 10.0


def _join_record_threads(threads: set[threading.Thread]) -> None:
    """Wait for the pipeline's record threads (``order*``) among ``threads``, each up to the bound."""
    for thread in threads:
        if thread.name.startswith("order"):
            thread.join(RECORD_THREADS_JOIN_S)


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

    # A record thread a deadline left behind (its pool is shut down without waiting, as at Lambda's
    # deadline) may still count a metric after its test: counts from an earlier test are not this one's.
    observability.metrics.clear_metrics()
    before = set(threading.enumerate())
    with mock_aws():
        yield build
        handler_module.configure()  # closes the pipeline's pool: its threads end with their task
        _join_record_threads(set(threading.enumerate()) - before)
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
