"""The pending index's writes, billed as the deployed table bills them.

The bench's meter (:mod:`bench.standin`) bills every global secondary index from the item before and
after each write. This test checks that figure against what moto itself indexes: the tables are
created as the default template defines them (``bench.deployment``), the real consumer handles a
batch, and after every call the index's entries are read from moto's own index scan (an observer
under the meter's lock). Every entry that appears, disappears or changes between two calls is an
index write of its size: that sum must be the meter's. Nothing about the consumer's marks is
assumed, so the check holds whatever the consumer writes.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

from bench import deployment, units
from bench.orders import OrderSource, batch_event
from bench.prices import PRICES, cost_per_million
from bench.run import FakeContext
from bench.standin import REGION, Meter, _dynamodb_backend
from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import PENDING_INDEX_NAME
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients

EVENTS, ROWS = "events", "rows"


def index_entries() -> dict[str, dict[str, Any]]:
    """The pending index as moto answers a scan of it: event id -> entry (wire format)."""
    items, _, _ = _dynamodb_backend().scan(
        EVENTS, {}, None, None, None, {}, {}, PENDING_INDEX_NAME, False, None, (None, None)
    )
    return {item.to_json()["Attributes"]["event_id"]["S"]: item.to_json()["Attributes"] for item in items}


def observed_index_wru(snapshots: list[dict[str, dict[str, Any]]]) -> float:
    """Index writes between consecutive snapshots: an entry put, deleted, or replaced (keys only: 2)."""
    total = 0.0
    for before, after in itertools.pairwise(snapshots):
        for event_id in before.keys() | after.keys():
            old, new = before.get(event_id), after.get(event_id)
            if old != new:
                total += sum(units.write_units(units.item_size(entry)) for entry in (old, new) if entry)
    return total


@pytest.fixture
def world(deployed: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """moto with the deployed table shapes, an observer of the index after every call, then the meter."""
    snapshots: list[dict[str, dict[str, Any]]] = []
    original = BotocoreStubber.__call__

    def observed(stubber: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
        response = original(stubber, event_name, request, **kwargs)
        if event_name.startswith("before-send.dynamodb.") and EVENTS in _dynamodb_backend().tables:
            snapshots.append(index_entries())
        return response

    BotocoreStubber.__call__ = observed  # type: ignore[method-assign]
    meter = Meter()
    meter.install()  # around the observer: the observer runs under the meter's lock, right after each call
    try:
        with mock_aws():
            dynamodb = boto3.client("dynamodb", region_name=REGION)
            sns = boto3.client("sns", region_name=REGION)
            sqs = boto3.client("sqs", region_name=REGION)
            for name, role in ((EVENTS, "processed_events_table"), (ROWS, "order_records_table")):
                deployment.create_table(dynamodb, name, deployed["tables"][role])
            topic_arn = sns.create_topic(Name="orders")["TopicArn"]
            env = {
                "PROCESSED_EVENTS_TABLE": EVENTS,
                "ORDER_RECORDS_TABLE": ROWS,
                "TOPIC_ARN": topic_arn,
                "DEAD_LETTER_QUEUE_URL": sqs.create_queue(QueueName="dlq")["QueueUrl"],
                "RECORD_TTL_SECONDS": "2592000",
            }
            handler_module.configure(Clients(dynamodb=dynamodb, sns=sns, sqs=sqs), env)
            snapshots.append(index_entries())
            yield {"meter": meter, "snapshots": snapshots, "sns": sns, "topic_arn": topic_arn}
    finally:
        handler_module.configure()
        meter.uninstall()
        BotocoreStubber.__call__ = original  # type: ignore[method-assign]


def deliver(world: dict[str, Any], count: int) -> tuple[float, float]:
    """A batch of ``count`` new orders through the real handler: (metered index WRU, observed index WRU)."""
    event = batch_event(list(OrderSource(7).orders(count)), random.Random(7))
    with world["meter"].measuring(0) as tally:
        handler_module.handler(event, FakeContext())
    return tally.index_wru, observed_index_wru(world["snapshots"])


def test_the_index_is_keys_only_as_deployed(deployed: dict[str, Any]) -> None:
    # GIVEN the default template's processed_events table
    [index] = deployed["tables"]["processed_events_table"]["GlobalSecondaryIndexes"]
    # THEN it carries the pending index, keys only (the observer's "a changed entry is 2 writes" rests on it)
    assert index["IndexName"] == PENDING_INDEX_NAME
    assert index["Projection"] == {"ProjectionType": "KEYS_ONLY"}


def test_the_meter_bills_the_index_writes_moto_made_for_new_orders(world: dict[str, Any]) -> None:
    # GIVEN tables as deployed, and 10 new orders
    # WHEN the consumer handles them
    metered, observed = deliver(world, 10)
    # THEN the meter billed exactly the index entries moto put, removed or replaced, by their size
    assert metered == observed
    # AND that is one entry per order, put by the transaction and left by the sent mark (1 unit each)
    assert len(index_entries()) == 10
    assert metered == 10
    # THEN the model's index line is those units at DynamoDB's write price
    cost = cost_per_million(
        wru_per_msg=0,
        rru_per_msg=0,
        sns_requests_per_msg=0,
        batch_ms=1,
        batch_size=10,
        memory_mb=128,
        index_wru_per_msg=metered / 10,
    )
    assert cost.dynamodb_index_writes == pytest.approx(observed / 10 * PRICES.dynamodb_per_million_wru)


def test_the_meter_bills_the_index_writes_of_records_left_pending(world: dict[str, Any]) -> None:
    # GIVEN tables as deployed, and an SNS outage: the topic is gone, so nothing can be notified
    world["sns"].delete_topic(TopicArn=world["topic_arn"])
    # WHEN the consumer handles 10 new orders (recorded, left pending for the reconciler)
    metered, observed = deliver(world, 10)
    # THEN the pending records are in the index (the reconciler finds them there) and the meter billed
    # exactly what moto indexed
    assert len(index_entries()) == 10
    assert observed > 0
    assert metered == observed
