"""Every path that publishes sends the same notification: first delivery, the ``pending`` branch, the
reconciler and ``order-pipeline pending --resend`` (body, attributes and FIFO ids, field by field)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import boto3

from idempotent_order_pipeline._lambda_asset.order_consumer.reconciler import ReconcilerClients, build_reconciler
from idempotent_order_pipeline.cli.commands import _resend
from idempotent_order_pipeline.cli.records import find_pending, get, order_from_row
from idempotent_order_pipeline.producer import OrderPublisher
from tests.consumer.harness import ArmedFault, World, client_error, is_mark, sqs_record
from tests.reconciler.harness import add_pending_index

PUBLISHED_FIELDS = ("Message", "MessageAttributes", "MessageGroupId", "MessageDeduplicationId")


def published(world: World, since: int) -> list[dict[str, Any]]:
    """The PublishBatch entries sent since the ``since``-th call, without their per-call ``Id``."""
    calls = world.board.requests.get("publish_batch", [])[since:]
    return [{k: e[k] for k in PUBLISHED_FIELDS if k in e} for call in calls for e in call["PublishBatchRequestEntries"]]


def marks_fail(world: World) -> None:
    """Every sent mark fails from now on, so the record stays pending for the next path."""
    world.board.disarm()
    world.board.arm(
        ArmedFault(
            client_error("BatchExecuteStatement", "ProvisionedThroughputExceededException"),
            operation="batch_execute_statement",
            when=is_mark,
        )
    )


def test_the_four_publishing_paths_send_identical_notifications(make_world: Callable[..., World]) -> None:
    # GIVEN a FIFO pipeline sending attributes and the whole order, whose sent marks keep failing (so the record
    # stays pending and every path gets to publish it), with the pending index the reconciler and the CLI read
    world = make_world(
        fifo=True,
        env={
            "NOTIFICATION_ATTRIBUTES": json.dumps(["country", "total", "customer.tier"]),
            "NOTIFICATION_BODY": "order",
        },
    )
    add_pending_index(world.dynamodb, world.events_table)
    placed = {"order_id": "o 1/ü", "country": "DE", "total": 1234.5, "customer": {"tier": "gold"}, "qty": 3}
    marks_fail(world)
    record = sqs_record(placed, group="o 1/ü")

    # WHEN 1. the first delivery records and publishes it
    world.invoke([record])
    first = published(world, 0)
    # WHEN 2. a redelivery finds it pending and publishes again
    calls = len(world.board.requests["publish_batch"])
    world.invoke([{**record, "messageId": "redelivery"}])
    pending_branch = published(world, calls)
    # WHEN 3. the reconciler finds it pending and publishes it from the stored row
    calls = len(world.board.requests["publish_batch"])
    reconciler = build_reconciler(
        {**world.env, "RECONCILE_AFTER_SECONDS": "0"},
        ReconcilerClients(dynamodb=world.clients.dynamodb, sns=world.clients.sns),
    )
    report = reconciler.run()
    assert report.found == 1
    by_reconciler = published(world, calls)
    # WHEN 4. `pending --resend` rebuilds the order from its row, re-enqueues it, and the consumer publishes it
    resend_queue = world.sqs.create_queue(QueueName="orders.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    [pending] = find_pending(world.dynamodb, world.events_table, older_than_seconds=0, now=time.time() + 1)
    resent_order = order_from_row(pending, get(world.dynamodb, world.orders_table, "order_id", pending.order_id))
    _resend(OrderPublisher(resend_queue, client=boto3.client("sqs")), resent_order)
    [message] = world.sqs.receive_message(QueueUrl=resend_queue, MessageAttributeNames=["All"], AttributeNames=["All"])[
        "Messages"
    ]
    calls = len(world.board.requests["publish_batch"])
    world.invoke(
        [
            sqs_record(
                message["Body"],
                key=message["MessageAttributes"]["idempotency_key"]["StringValue"],
                group=message["Attributes"]["MessageGroupId"],
            )
        ]
    )
    by_resend = published(world, calls)

    # THEN each path published one entry, and the four are identical field by field
    assert len(first) == len(pending_branch) == len(by_reconciler) == len(by_resend) == 1
    for field in PUBLISHED_FIELDS:
        assert first[0][field] == pending_branch[0][field] == by_reconciler[0][field] == by_resend[0][field], field
    # AND they carry what was configured (so the comparison is not between empty notifications)
    body = json.loads(first[0]["Message"])
    assert (body["order_id"], body["country"], body["customer"]) == ("o 1/ü", "DE", {"tier": "gold"})
    assert set(first[0]["MessageAttributes"]) == {"event_id", "order_id", "country", "total", "customer.tier"}
    assert first[0]["MessageGroupId"].startswith("sha256:")  # the order id is no valid group id: hashed


def test_the_reconciler_reads_only_the_fields_the_notification_carries(make_world: Callable[..., World]) -> None:
    # GIVEN a pipeline sending two attributes (one dotted) with the thin body, and an order left pending
    world = make_world(env={"NOTIFICATION_ATTRIBUTES": json.dumps(["country", "customer.tier"])})
    add_pending_index(world.dynamodb, world.events_table)
    marks_fail(world)
    world.invoke([sqs_record({"order_id": "o-1", "country": "DE", "customer": {"tier": "gold"}, "secret": "x"})])
    first = published(world, 0)
    world.board.disarm()
    calls = len(world.board.requests["publish_batch"])
    # WHEN the reconciler notifies it
    reconciler = build_reconciler(
        {**world.env, "RECONCILE_AFTER_SECONDS": "0"},
        ReconcilerClients(dynamodb=world.clients.dynamodb, sns=world.clients.sns),
    )
    assert reconciler.run().reconciled == 1
    # THEN its read of the order row names the identity and the two top-level fields, nothing else (the role's
    # dynamodb:Attributes list), and its notification is the consumer's
    [row_read] = [
        request["RequestItems"][world.orders_table]
        for request in world.board.requests["batch_get_item"]
        if world.orders_table in request["RequestItems"]
    ]
    assert set(row_read["ExpressionAttributeNames"].values()) == {
        "order_id",
        "event_id",
        "payload_sha256",
        "country",
        "customer",
    }
    assert published(world, calls) == first
    assert first[0]["MessageAttributes"]["customer.tier"] == {"DataType": "String", "StringValue": "gold"}
