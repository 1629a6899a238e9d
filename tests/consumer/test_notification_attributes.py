"""``notification_attributes`` and ``notification_body``: what notifications carry, and subscribers filtering."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import MAX_MESSAGE_BYTES, message_bytes
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_order_message
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.notification import (
    NotificationFormat,
    build_notification,
)
from tests.consumer.harness import World, sqs_record

ATTRIBUTES = ["country", "total", "customer.tier", "tags", "missing", "express", "customer", "note"]


def order(order_id: str, **fields: Any) -> dict[str, Any]:
    return {"order_id": order_id, **fields}


def world_with(make_world: Callable[..., World], attributes: list[str], body: str = "thin") -> World:
    return make_world(env={"NOTIFICATION_ATTRIBUTES": json.dumps(attributes), "NOTIFICATION_BODY": body})


def envelope_attributes(notification: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {name: (a["Type"], a["Value"]) for name, a in notification.get("MessageAttributes", {}).items()}


def test_configured_fields_become_typed_attributes_and_the_rest_is_left_out(make_world: Callable[..., World]) -> None:
    # GIVEN a pipeline sending eight order fields as attributes, and an order holding every kind of value
    world = world_with(make_world, ATTRIBUTES)
    placed = order(
        "o-1",
        country="DE",
        total=1234.50,
        customer={"id": "c-1", "tier": "gold"},
        tags=["gift", 2, True, None],
        express=True,
        note="",
    )
    # WHEN it is recorded
    world.invoke([sqs_record(placed)])
    # THEN the notification carries the ids, the string, the number (its exact text), the dotted path and the
    # array; the absent field, the boolean, the object and the empty string are left out, and nothing failed
    [notification] = world.new_notifications()
    attributes = envelope_attributes(notification)
    event_id = json.loads(notification["Message"])["event_id"]
    assert attributes == {
        "event_id": ("String", event_id),
        "order_id": ("String", "o-1"),
        "country": ("String", "DE"),
        "total": ("Number", "1234.5"),
        "customer.tier": ("String", "gold"),
        "tags": ("String.Array", '["gift",2,true,null]'),
    }
    # AND the body is the thin one, as without attributes
    assert json.loads(notification["Message"]) == {
        "event_id": event_id,
        "order_id": "o-1",
        "payload_sha256": world.order_rows()["o-1"]["payload_sha256"],
    }


def test_the_order_body_is_the_stored_row_when_it_fits(make_world: Callable[..., World]) -> None:
    # GIVEN notification_body="order"
    world = world_with(make_world, ["country"], body="order")
    placed = order("o-1", country="DE", amount=0.10, customer={"tier": "gold"})
    # WHEN an order is recorded
    world.invoke([sqs_record(placed)])
    # THEN the body is the stored row (numbers exact), event_id and order_id included
    [notification] = world.new_notifications()
    body = json.loads(notification["Message"], parse_float=str)
    row = world.order_rows()["o-1"]
    assert body == {**placed, "amount": "0.1", "event_id": row["event_id"], "payload_sha256": row["payload_sha256"]}


def test_an_order_body_too_large_for_sns_falls_back_to_the_thin_body(make_world: Callable[..., World]) -> None:
    # GIVEN notification_body="order" and an order whose row is larger than an SNS message
    world = world_with(make_world, ["country"], body="order")
    placed = order("o-big", country="DE", blob="x" * (MAX_MESSAGE_BYTES - 100))
    # WHEN it is recorded
    response = world.invoke([sqs_record(placed)])
    # THEN it is announced with the thin body and its attributes, not failed
    assert response == {"batchItemFailures": []}
    [notification] = world.new_notifications()
    assert set(json.loads(notification["Message"])) == {"event_id", "order_id", "payload_sha256"}
    assert envelope_attributes(notification)["country"] == ("String", "DE")


def row_of(placed: dict[str, Any]) -> dict[str, Any]:
    return parse_order_message(json.dumps(placed)).order_item


def test_an_order_body_that_fits_only_without_the_attributes_falls_back_to_the_thin_body() -> None:
    # GIVEN an order whose stored row, as the body, fits in an SNS message 500 bytes to spare, and a configured
    # attribute of 1,000 bytes
    order_body = NotificationFormat(body="order")
    empty = build_notification(row_of(order("o-1", note="n" * 1000, blob="")), order_body).message
    placed = order("o-1", note="n" * 1000, blob="x" * (MAX_MESSAGE_BYTES - 500 - message_bytes(empty)))
    assert message_bytes(build_notification(row_of(placed), order_body).message) == MAX_MESSAGE_BYTES - 500
    # WHEN its notification is built with the attribute
    notification = build_notification(row_of(placed), NotificationFormat(attributes=("note",), body="order"))
    # THEN the body is the thin one, the attribute is kept, and the whole fits
    assert set(json.loads(notification.message)) == {"event_id", "order_id", "payload_sha256"}
    assert notification.attributes["note"]["StringValue"] == "n" * 1000
    assert message_bytes(notification.message, notification.attributes) <= MAX_MESSAGE_BYTES


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e-130, None),  # DynamoDB stores it; SNS's Number stops at 1E-128
        (1e125, ("Number", "1" + "0" * 125)),  # the stored text, as DynamoDB writes it
        (0, ("Number", "0")),
        ("bell\u0007", None),  # a character SQS refuses
        ([{"nested": 1}], None),  # an array of objects
        ([], ("String.Array", "[]")),
        ("Größe", ("String", "Größe")),
    ],
)
def test_each_value_is_carried_only_as_sns_can(value: Any, expected: tuple[str, str] | None) -> None:
    # GIVEN an order whose field holds the value / WHEN its notification is built
    notification = build_notification(row_of(order("o-1", field=value)), NotificationFormat(attributes=("field",)))
    # THEN the attribute is there with the right type, or left out
    attribute = notification.attributes.get("field")
    assert (None if attribute is None else (attribute["DataType"], attribute["StringValue"])) == expected


@pytest.mark.parametrize("configured", [("big", "small"), ("small", "big")])
def test_attributes_that_cannot_fit_with_the_thin_body_are_left_out_largest_first(configured: tuple[str, str]) -> None:
    # GIVEN two configured fields that together do not fit in one SNS message, one much larger, in either order
    big, small = "b" * (MAX_MESSAGE_BYTES - 1000), "s" * 2000
    row = row_of(order("o-1", big=big, small=small))
    # WHEN the notification is built
    notification = build_notification(row, NotificationFormat(attributes=configured))
    # THEN the larger one is left out, the smaller kept, and the whole fits
    assert set(notification.attributes) == {"event_id", "order_id", "small"}
    assert message_bytes(notification.message, notification.attributes) <= MAX_MESSAGE_BYTES


def subscribe(world: World, name: str, policy: dict[str, Any], scope: str = "MessageAttributes") -> str:
    url = world.sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = world.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    world.sns.subscribe(
        TopicArn=world.topic_arn,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"FilterPolicy": json.dumps(policy), "FilterPolicyScope": scope, "RawMessageDelivery": "true"},
    )
    return url


def received_orders(world: World, url: str) -> list[str]:
    messages = world.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
    return sorted(json.loads(message["Body"])["order_id"] for message in messages)


def test_filtered_subscribers_receive_exactly_their_orders(make_world: Callable[..., World]) -> None:
    # GIVEN fulfilment filtering on country = DE, fraud on total > 1000 (attributes), and loyalty on the body's
    # customer.tier = gold (notification_body="order")
    world = world_with(make_world, ["country", "total"], body="order")
    fulfilment = subscribe(world, "fulfilment", {"country": ["DE"]})
    fraud = subscribe(world, "fraud", {"total": [{"numeric": [">", 1000]}]})
    loyalty = subscribe(world, "loyalty", {"customer": {"tier": ["gold"]}}, scope="MessageBody")
    orders = [
        order("o-1", country="DE", total=50, customer={"tier": "silver"}),
        order("o-2", country="FR", total=5000, customer={"tier": "gold"}),
        order("o-3", country="DE", total=1000.01, customer={"tier": "gold"}),
        order("o-4", country="NL", total=1000, customer={}),
    ]
    # WHEN the orders are recorded
    assert world.invoke([sqs_record(o) for o in orders]) == {"batchItemFailures": []}
    # THEN each subscriber received exactly the orders its policy selects
    assert received_orders(world, fulfilment) == ["o-1", "o-3"]
    assert received_orders(world, fraud) == ["o-2", "o-3"]
    assert received_orders(world, loyalty) == ["o-2", "o-3"]
