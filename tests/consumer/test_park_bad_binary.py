"""Parking never raises on an attribute SQS could not have delivered: a binaryValue that is not base64."""

from __future__ import annotations

import json

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import PARKED_ATTRIBUTE
from tests.consumer.harness import World, sqs_record

BAD_BINARY = {"dataType": "Binary", "binaryValue": "%%% not base64 %%%"}


def test_a_bad_base64_binary_value_is_parked_with_its_reason_not_raised(world: World) -> None:
    # GIVEN an invalid order whose attributes include a binaryValue that is not base64 (a hand-built
    # event), and another invalid order in the same batch (the same parking call)
    bad = sqs_record({"amount": 1}, attributes={"blob": BAD_BINARY})
    other = sqs_record({"amount": 2})

    # WHEN the consumer processes the batch
    response = world.invoke([bad, other])

    # THEN both are parked with their reason and acknowledged (before: the parking raised, both stayed
    # unacknowledged until SQS moved them without a reason)
    assert response == {"batchItemFailures": []}
    parked = {m["MessageAttributes"]["source_message_id"]["StringValue"]: m for m in world.dead_letters()}
    assert set(parked) == {bad["messageId"], other["messageId"]}
    assert all(m["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE" for m in parked.values())
    # AND the bad attribute travels in the envelope as it came, so nothing of the message is lost
    envelope = json.loads(parked[bad["messageId"]]["MessageAttributes"][PARKED_ATTRIBUTE]["StringValue"])
    assert envelope["packed"] == {"blob": BAD_BINARY}
