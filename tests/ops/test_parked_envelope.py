"""The consumer's mark on a parked message: only an exact envelope of the current version counts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import InvalidMessageError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import (
    ADDED_ATTRIBUTES,
    PARKED_ATTRIBUTE,
    Envelope,
    producer_attributes,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.dead_letter import dead_letter_attributes
from idempotent_order_pipeline.cli.dead_letters import attributes_for_redrive


def _receive_shape(attributes: dict[str, Any]) -> dict[str, Any]:
    """SendMessage's attributes as ReceiveMessage returns them (string attributes only here)."""
    return {name: {"DataType": v["DataType"], "StringValue": v["StringValue"]} for name, v in attributes.items()}


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        "[]",
        '{"version": 2, "added": ["order_pipeline_parked"]}',
        '{"version": true, "added": ["order_pipeline_parked"]}',
        '{"version": 1, "added": ["error_code"]}',
        '{"version": 1, "added": ["order_pipeline_parked", "trace"]}',
        '{"version": 1, "added": ["order_pipeline_parked"], "packed": {"a": 1}}',
        '{"version": 1, "added": ["order_pipeline_parked"], "extra": 0}',
    ],
)
def test_anything_but_an_exact_current_envelope_is_not_the_consumers_mark(value: str) -> None:
    # GIVEN an attribute of the marker's name whose value is not exactly a version-1 envelope
    # WHEN read, THEN it is not taken for the consumer's mark
    assert Envelope.read(value) is None
    # AND a message that carries it (as SQS moved it) goes back with every attribute untouched
    attributes = {
        PARKED_ATTRIBUTE: {"DataType": "String", "StringValue": value},
        "error_code": {"DataType": "String", "StringValue": "MINE"},
    }
    assert attributes_for_redrive(attributes) == attributes


def test_a_park_then_a_redrive_is_the_identity_and_a_second_park_replaces_the_first_mark() -> None:
    # GIVEN a message with producer attributes of the consumer's reserved names
    lambda_attributes = {
        name: {"dataType": "String", "stringValue": f"producer-{name}"}
        for name in (*ADDED_ATTRIBUTES, "original_attributes")
    }
    sent = {name: {"DataType": "String", "StringValue": v["stringValue"]} for name, v in lambda_attributes.items()}
    # WHEN the consumer parks it
    parked = dead_letter_attributes(lambda_attributes, InvalidMessageError("bad"), "m-1")
    # THEN the reason is the consumer's and the producer's attributes travel packed in the envelope
    assert set(parked) == set(ADDED_ATTRIBUTES)
    assert parked["error_code"]["StringValue"] == "INVALID_MESSAGE"
    envelope = Envelope.read(parked[PARKED_ATTRIBUTE]["StringValue"])
    assert envelope is not None
    assert set(envelope.packed) == set(sent)
    # AND a redrive returns exactly what the producer sent
    assert attributes_for_redrive(_receive_shape(dict(parked))) == sent
    # WHEN the parked message comes back as it is (a move task) and is parked again
    again = dead_letter_attributes(
        {name: {"dataType": "String", "stringValue": v["StringValue"]} for name, v in parked.items()},
        InvalidMessageError("still bad"),
        "m-2",
    )
    # THEN the earlier mark was replaced, not packed inside the new one
    assert again["source_message_id"]["StringValue"] == "m-2"
    assert json.loads(again[PARKED_ATTRIBUTE]["StringValue"])["packed"] == envelope.packed
    assert attributes_for_redrive(_receive_shape(dict(again))) == sent


def test_the_envelope_is_written_without_whitespace() -> None:
    # GIVEN a message whose original attributes are packed (one has a reserved name)
    attributes = {
        "error_code": {"dataType": "String", "stringValue": "mine"},
        "n": {"dataType": "Number", "stringValue": "1"},
    }
    # WHEN it is parked
    envelope = dead_letter_attributes(attributes, InvalidMessageError("bad"), "m-1")[PARKED_ATTRIBUTE]["StringValue"]
    # THEN the envelope is compact JSON: SQS counts its bytes against the message's size limit
    assert json.loads(envelope)["packed"] == attributes
    assert envelope == json.dumps(json.loads(envelope), separators=(",", ":"), sort_keys=True)


def test_attributes_that_travel_beside_the_reason_come_back_without_it() -> None:
    # GIVEN a message with a producer attribute of an ordinary name (copied beside the reason, not packed)
    trace = {"dataType": "String", "stringValue": "t-1"}
    parked = dead_letter_attributes({"trace": trace}, InvalidMessageError("bad"), "m-1")
    assert set(parked) == {"trace", *ADDED_ATTRIBUTES}
    # WHEN its attributes are read back, by the consumer (a move task brought it back) and by a redrive
    lambda_shape = {name: {"dataType": v["DataType"], "stringValue": v["StringValue"]} for name, v in parked.items()}
    # THEN each is the producer's attribute alone: what the consumer added is left out
    assert producer_attributes(lambda_shape) == {"trace": trace}
    assert attributes_for_redrive(_receive_shape(dict(parked))) == {
        "trace": {"DataType": "String", "StringValue": "t-1"}
    }
