"""One size end to end: every message the queue accepts is recorded, or parked whole with its reason.

The queue takes at most :data:`MAX_MESSAGE_BYTES` (256 KiB, body and attributes as SQS counts
them); the DLQ takes :data:`DEAD_LETTER_MAX_MESSAGE_BYTES` (1 MiB). Real SQS counts the attributes
in a message's size (moto counts the body only), so the bound is checked with SQS's own rule.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import (
    DEAD_LETTER_MAX_MESSAGE_BYTES,
    MAX_MESSAGE_BYTES,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import InvalidMessageError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import (
    MAX_ORDER_ID_LENGTH,
    item_size,
    parse_order_message,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.dead_letter import (
    MAX_ERROR_MESSAGE_CHARS,
    dead_letter_attributes,
)
from tests.consumer.harness import World, sqs_record


def sqs_size(body: str, attributes: Mapping[str, Mapping[str, Any]]) -> int:
    """A message's size as SQS counts it: the body, and each attribute's name, type and value (UTF-8)."""
    size = len(body.encode())
    for name, value in attributes.items():
        size += len(name.encode()) + len(value["DataType"].encode())
        size += len(value["BinaryValue"]) if "BinaryValue" in value else len(value["StringValue"].encode())
    return size


def lambda_shape(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    return {
        name: {"dataType": v["DataType"], "binaryValue": base64.b64encode(v["BinaryValue"]).decode()}
        if "BinaryValue" in v
        else {"dataType": v["DataType"], "stringValue": v["StringValue"]}
        for name, v in attributes.items()
    }


def worst_case(attribute_share: float, character: str, count: int) -> tuple[str, dict[str, dict[str, Any]]]:
    """A message of exactly MAX_MESSAGE_BYTES: ``count`` attributes of ``character`` taking this share."""
    attributes: dict[str, dict[str, Any]] = {}
    budget = int(MAX_MESSAGE_BYTES * attribute_share)
    for i in range(count):
        name = f"a{i}"
        room = budget // count - len(name) - len("String")
        attributes[name] = {"DataType": "String", "StringValue": character * (room // len(character.encode()))}
    body = "x" * (MAX_MESSAGE_BYTES - sqs_size("", attributes))
    assert sqs_size(body, attributes) <= MAX_MESSAGE_BYTES
    return body, attributes


@pytest.mark.parametrize(
    ("share", "character", "count"),
    [
        (0.0, "x", 0),  # all body
        (0.99, "\u00e9", 10),  # packed (10 originals), each 2-byte character escaped to 6 in the envelope
        (0.99, "\U0001f600", 10),  # packed, 4-byte characters escaped to 12
        (0.99, "\u00e9", 6),  # copied beside the reason
        (0.99, '\t"\\\\', 10),  # tab, quote, backslash: each escaped to 2 bytes by the envelope
    ],
    ids=["all-body", "packed-2-byte", "packed-4-byte", "copied", "packed-escapes"],
)
def test_any_message_the_queue_accepts_fits_the_dlq_with_its_reason(share: float, character: str, count: int) -> None:
    # GIVEN a message of the queue's maximum size, with attributes of the most expanding kind
    body, attributes = worst_case(share, character, count)
    # WHEN the consumer adds its reason (the longest error message) and envelope to park it
    error = InvalidMessageError("\u00e9" * 2 * MAX_ERROR_MESSAGE_CHARS)
    parked = dead_letter_attributes(lambda_shape(attributes), error, "m" * 100)
    # THEN SQS's count of the parked message is within the DLQ's maximum: it is parked whole
    assert sqs_size(body, parked) <= DEAD_LETTER_MAX_MESSAGE_BYTES, sqs_size(body, parked)


def test_an_invalid_body_of_the_maximum_size_is_parked_whole_with_its_reason(world: World) -> None:
    # GIVEN an invalid body (an order id too long) of exactly the queue's maximum size
    body = json.dumps({"order_id": "o" * (MAX_ORDER_ID_LENGTH + 1), "pad": ""})
    body = body[:-2] + "p" * (MAX_MESSAGE_BYTES - len(body.encode())) + '"}'
    assert len(body.encode()) == MAX_MESSAGE_BYTES
    record = sqs_record(body)
    # WHEN the consumer receives it
    response = world.invoke([record])
    # THEN it is parked with its reason, the body whole, and acknowledged
    assert response == {"batchItemFailures": []}
    [parked] = world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE"
    assert parked["Body"] == body


@pytest.mark.parametrize(
    ("item", "size"),
    [
        pytest.param({"n": {"N": "0"}}, 1 + 2, id="zero-one-significant-digit"),
        pytest.param({"n": {"N": "-12.340"}}, 1 + 3, id="four-significant-digits"),
        pytest.param({"m": {"M": {"ab": {"S": "xyz"}}}}, 1 + 3 + (1 + 2 + 3), id="map"),
        pytest.param({"l": {"L": [{"BOOL": True}, {"NULL": True}]}}, 1 + 3 + (1 + 1) * 2, id="list"),
    ],
)
def test_a_rows_size_is_counted_by_dynamodbs_rules(item: dict[str, Any], size: int) -> None:
    # GIVEN an order row / WHEN its size is counted (for the 400 KB limit)
    # THEN it is DynamoDB's count: the name, then 1 byte per 2 significant digits plus 1 for a number (at least
    # one digit), 3 bytes plus 1 per element for a map or list, a map's keys included
    assert item_size(item) == size


def test_equal_scalars_of_one_body_share_one_attribute_value_at_any_depth() -> None:
    # GIVEN an order holding the number 0 and null as fields, in a list, in a map and in a list within a map
    body = {"order_id": "o-1", "z": 0, "n": None, "a": [0, None, 0], "b": {"c": 0, "d": [None]}}
    # WHEN its row is built for DynamoDB
    row = parse_order_message(json.dumps(body)).order_item
    # THEN every 0 is one object, and every null (a body of 130,000 zeros holds one {"N": "0"}, not 130,000)
    a, b = row["a"]["L"], row["b"]["M"]
    assert row["z"] == {"N": "0"}
    assert row["z"] is a[0] is a[2] is b["c"]
    assert row["n"] == {"NULL": True}
    assert row["n"] is a[1] is b["d"]["L"][0]
