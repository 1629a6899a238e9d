"""A parked message brought back by an SQS move task, as it is: the consumer reads its packed attributes.

The consumer packs a message's attributes into its envelope (:mod:`order_consumer.contract.parked`)
when they do not fit beside the reason, or when one has a name the consumer adds. The CLI's redrive
unpacks them; SQS's own "Start DLQ redrive" (a move task) moves the message as it is, envelope
and reason included. Either way the producer's ``idempotency_key`` must still be the key.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import InvalidMessageError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import PARKED_ATTRIBUTE, Envelope
from idempotent_order_pipeline._lambda_asset.order_consumer.dead_letter import dead_letter_attributes
from tests.consumer.harness import World, sqs_record

ORDER = {"order_id": "o-moved", "amount": 12}
KEY = "producer-key-1"


def as_moved(sent: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """SendMessage attributes as Lambda delivers them after a move task (camelCase, base64 binaries)."""
    moved: dict[str, dict[str, Any]] = {}
    for name, value in sent.items():
        if "BinaryValue" in value:
            encoded = base64.b64encode(value["BinaryValue"]).decode()
            moved[name] = {"dataType": value["DataType"], "binaryValue": encoded}
        else:
            moved[name] = {"dataType": value["DataType"], "stringValue": value["StringValue"]}
    return moved


def producer_attributes(packed_because: str) -> dict[str, dict[str, str]]:
    """The producer's attributes, with the idempotency key, that the consumer must pack when parking."""
    attributes = {"idempotency_key": {"dataType": "String", "stringValue": KEY}}
    if packed_because == "too-many":
        attributes.update({f"trace_{i}": {"dataType": "String", "stringValue": f"t{i}"} for i in range(7)})
    else:  # a producer attribute with a name the consumer adds
        attributes["error_code"] = {"dataType": "String", "stringValue": "PRODUCERS_OWN"}
    return attributes


@pytest.mark.parametrize("packed_because", ["too-many", "reserved-name"])
@pytest.mark.parametrize("identity_fields", [None, "order_id,customer_id"], ids=["derived-keys", "identity-fields"])
def test_a_move_task_redrive_keeps_the_packed_idempotency_key(
    make_world: Callable[..., World], packed_because: str, identity_fields: str | None
) -> None:
    # GIVEN a message the consumer parked with its attributes packed into the envelope
    world = make_world(identity_fields=identity_fields)
    parked = dead_letter_attributes(producer_attributes(packed_because), InvalidMessageError("was bad"), "m-first")
    envelope = Envelope.read(parked[PARKED_ATTRIBUTE]["StringValue"])
    assert envelope is not None
    assert envelope.packed["idempotency_key"]["stringValue"] == KEY
    assert "idempotency_key" not in parked  # only in the envelope

    # WHEN a move task brings it back as it is and the consumer receives it
    response = world.invoke([sqs_record(ORDER, attributes=as_moved(parked))])

    # THEN the order is recorded under the producer's key (not a derived one, not parked as invalid)
    assert response == {"batchItemFailures": []}
    assert set(world.event_records()) == {KEY}
    assert world.order_rows()["o-moved"]["event_id"] == KEY
    assert derive_event_id(ORDER) != KEY
    assert world.dead_letters() == []
    assert world.notified_events() == {KEY: 1}
