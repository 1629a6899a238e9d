from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_entry
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    MARK_STATEMENT_ATTRIBUTES,
    RECONCILER_UPDATE_ATTRIBUTES,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients
from tests.dynamodb_requests import action_of, named_attributes, updates
from tests.reconciler.harness import ReconcilerWorld

_worlds = itertools.count()


@pytest.fixture
def make_world() -> Iterator[Callable[..., ReconcilerWorld]]:
    """Build moto-backed worlds (one backend per test; each world's resources under its own prefix).

    After the test, every UpdateItem the reconciler made in it (its guarded clients' calls; the
    consumer runs of the harness have boards of their own) must name only the attributes the
    reconciler's role may update (``RECONCILER_UPDATE_ATTRIBUTES``, its ``dynamodb:Attributes`` list), and
    every PartiQL statement only those of its PartiQLUpdate statement (``MARK_STATEMENT_ATTRIBUTES``).
    """
    worlds: list[ReconcilerWorld] = []
    with mock_aws():
        aws = Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))

        def build(**options: Any) -> ReconcilerWorld:
            worlds.append(ReconcilerWorld(prefix=f"w{next(_worlds)}-", aws=aws, **options))
            return worlds[-1]

        yield build
    reconciler_entry.configure()
    allowed = {
        "dynamodb:UpdateItem": set(RECONCILER_UPDATE_ATTRIBUTES),
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
    assert not beyond, f"the reconciler updated attributes its role may not: {sorted(beyond)}"


@pytest.fixture
def world(make_world: Callable[..., ReconcilerWorld]) -> ReconcilerWorld:
    return make_world()
