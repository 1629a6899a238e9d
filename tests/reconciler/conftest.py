from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import boto3
import pytest
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_entry
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients
from tests.reconciler.harness import ReconcilerWorld

_worlds = itertools.count()


@pytest.fixture
def make_world() -> Iterator[Callable[..., ReconcilerWorld]]:
    """Build moto-backed worlds (one backend per test; each world's resources under its own prefix)."""
    with mock_aws():
        aws = Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        yield lambda **options: ReconcilerWorld(prefix=f"w{next(_worlds)}-", aws=aws, **options)
    reconciler_entry.configure()


@pytest.fixture
def world(make_world: Callable[..., ReconcilerWorld]) -> ReconcilerWorld:
    return make_world()
