"""Hostile input classes through the real handler: exact numbers, poison parked at once, unambiguous keys.

Each test drives ``order_consumer.handler.handler`` against moto and asserts the tables, the DLQ
(with ``error_code``), the notifications and ``batchItemFailures``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import InvalidTextError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id, payload_sha256
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import check_attributes, parse_body
from tests.consumer.harness import World, sqs_record

# Two amounts that agree on their first 28 significant digits and differ in the 31st.
AMOUNT_A = "1234567890123456789012345678901"
AMOUNT_B = "1234567890123456789012345678902"


def raw_row(world: World, order_id: str) -> dict[str, Any]:
    """The order row exactly as DynamoDB (moto) holds it, attribute values untouched."""
    return world.dynamodb.get_item(
        TableName=world.orders_table, Key={"order_id": {"S": order_id}}, ConsistentRead=True
    )["Item"]


def notified_event_ids(world: World) -> list[str]:
    return [json.loads(n["Message"])["event_id"] for n in world.new_notifications()]


def test_orders_that_differ_after_the_28th_digit_are_a_conflict_not_a_duplicate(world: World) -> None:
    # GIVEN an order recorded with a 31-digit amount
    first = sqs_record('{"order_id": "o-big", "event_id": "evt-big", "amount": ' + AMOUNT_A + "}")
    assert world.invoke([first]) == {"batchItemFailures": []}
    assert notified_event_ids(world) == ["evt-big"]
    # WHEN the same event id arrives with an amount DynamoDB tells apart (31st digit)
    second = sqs_record('{"order_id": "o-big", "event_id": "evt-big", "amount": ' + AMOUNT_B + "}")
    response = world.invoke([second])
    # THEN it is acknowledged and parked as a conflict, not skipped as a duplicate
    assert response == {"batchItemFailures": []}
    [parked] = world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "IDEMPOTENCY_CONFLICT"
    assert parked["MessageAttributes"]["source_message_id"]["StringValue"] == second["messageId"]
    # AND the row keeps the first amount, all 31 digits; nothing else was notified
    assert raw_row(world, "o-big")["amount"] == {"N": AMOUNT_A}
    assert notified_event_ids(world) == []
    assert world.event_records()["evt-big"]["status"] == "sent"


@pytest.mark.parametrize(
    ("spelling", "same_as", "stored"),
    [
        pytest.param("1." + "0" * 40, "1", "1", id="41-digit-one"),
        pytest.param("0E-200", "0", "0", id="zero-tiny-exponent"),
        pytest.param("1" + "0" * 41, "1E+41", "1" + "0" * 41, id="one-and-41-zeros"),
        pytest.param("10.0", "1e1", "10", id="ten"),
        pytest.param("-0.000", "0", "0", id="negative-zero"),
        pytest.param("1E+125", "1" + "0" * 125, "1" + "0" * 125, id="largest-exponent"),
        pytest.param(
            "9.9999999999999999999999999999999999999E+125",
            None,
            "99999999999999999999999999999999999999" + "0" * 88,
            id="max",
        ),
        pytest.param("-1E-130", None, "-0." + "0" * 129 + "1", id="smallest-magnitude"),
        pytest.param(
            "0.00" + "1234567890123456789012345678901234567800",
            None,
            "0.00" + "12345678901234567890123456789012345678",
            id="38-digits-trimmed",
        ),
    ],
)
def test_number_spellings_dynamodb_stores_are_recorded_and_fingerprinted_alike(
    world: World, spelling: str, same_as: str | None, stored: str
) -> None:
    # GIVEN a number DynamoDB stores once its leading and trailing zeros are trimmed
    body = '{"order_id": "o-n", "event_id": "evt-n", "n": ' + spelling + "}"
    # WHEN the handler processes it
    response = world.invoke([sqs_record(body)])
    # THEN it is recorded exactly (not parked), and notified once
    assert response == {"batchItemFailures": []}
    assert world.dead_letters() == []
    assert raw_row(world, "o-n")["n"] == {"N": stored}
    assert notified_event_ids(world) == ["evt-n"]
    if same_as is not None:
        # AND another spelling of the same number is a duplicate (same fingerprint), not a conflict
        again = '{"order_id": "o-n", "event_id": "evt-n", "n": ' + same_as + "}"
        assert payload_sha256(parse_body(again)) == payload_sha256(parse_body(body))
        assert world.invoke([sqs_record(again)]) == {"batchItemFailures": []}
        assert world.dead_letters() == []
        assert notified_event_ids(world) == []


POISON = [
    pytest.param('{"order_id": "o-p", "note": "\\ud800"}', "note", id="lone-surrogate-value"),
    pytest.param('{"order_id": "o-p", "items": [{"sku": "A"}, {"sku": "\\udfff x"}]}', "items[1].sku", id="nested"),
    pytest.param('{"order_id": "o-p", "\\ud83d": 1}', "field name", id="lone-surrogate-field-name"),
    pytest.param('{"order_id": "o-p", "m": {"\\udc00k": 1}}', "field name in m", id="lone-surrogate-map-key"),
    pytest.param('{"order_id": "o-\\ud800"}', "order_id", id="lone-surrogate-order-id"),
    pytest.param('{"order_id": "o-p", "event_id": "e-\\ud800"}', "event_id", id="lone-surrogate-event-id"),
    pytest.param('{"order_id": "o-p", "n": 1e1000000}', "n: 1e1000000 is out of range", id="huge-exponent"),
    pytest.param('{"order_id": "o-p", "items": [1, 2, {"price": -1e-131}]}', "items[2].price", id="too-small"),
    pytest.param('{"order_id": "o-p", "n": 1e126}', "out of range", id="just-too-large"),
    pytest.param('{"order_id": "o-p", "n": 1234567890123456789012345678901234567891}', "40 significant", id="digits"),
    pytest.param('{"order_id": "o-p", "n": 1e' + "9" * 5000 + "}", "out of range", id="exponent-of-5000-digits"),
    pytest.param('{"order_id": "o-p", "n": Infinity}', "Infinity", id="infinity"),
    pytest.param('{"order_id": "o-\\u0001"}', "order_id' has the character", id="control-char-in-order-id"),
    pytest.param('{"order_id": "o-p", "event_id": "e-\\u0000"}', "event_id' has the character", id="nul-in-event-id"),
    # Control characters reach an operator's terminal through `dlq list`, `inspect` and `pending`.
    pytest.param('{"order_id": "o-\\r1"}', "order_id' has the character", id="carriage-return-in-order-id"),
    pytest.param('{"order_id": "o-\\t1"}', "order_id' has the character", id="tab-in-order-id"),
    pytest.param('{"order_id": "o-\\u007f"}', "order_id' has the character", id="del-in-order-id"),
    pytest.param('{"order_id": "o-\\u009b31m"}', "order_id' has the character", id="c1-csi-in-order-id"),
    pytest.param('{"order_id": "o-p", "event_id": "e-\\u0085"}', "event_id' has the character", id="c1-in-event-id"),
]


@pytest.mark.parametrize(("body", "named"), POISON)
def test_poison_is_parked_at_once_with_its_reason_never_retried(world: World, body: str, named: str) -> None:
    # GIVEN a message (plain ASCII on the wire) that can never be stored, on its first receive
    record = sqs_record(body, attributes={"trace": {"stringValue": "t-1", "dataType": "String"}})
    # WHEN the handler processes it
    response = world.invoke([record])
    # THEN it is acknowledged, not left for SQS to redeliver
    assert response == {"batchItemFailures": []}
    # AND it is in the DLQ as it came, with INVALID_MESSAGE and a reason naming the field
    [parked] = world.dead_letters()
    assert parked["Body"] == body
    attributes = parked["MessageAttributes"]
    assert attributes["error_code"]["StringValue"] == "INVALID_MESSAGE"
    assert named in attributes["error_message"]["StringValue"]
    assert attributes["trace"]["StringValue"] == "t-1"
    # AND nothing was written or notified
    assert world.order_rows() == {}
    assert world.event_records() == {}
    assert world.new_notifications() == []


def test_a_poison_record_does_not_hold_back_the_valid_ones_of_its_batch(world: World) -> None:
    # GIVEN a batch of poison between two valid orders (the issue's [1e999999, ...] x 300 among them)
    good = [sqs_record({"order_id": f"ok-{n}"}) for n in range(2)]
    poison = [
        sqs_record('{"order_id": "bad-1", "x": [' + ",".join(["1e999999"] * 300) + "]}"),
        sqs_record('{"order_id": "bad-2", "x": "\\ud800"}'),
    ]
    # WHEN the handler processes the batch
    response = world.invoke([good[0], *poison, good[1]])
    # THEN nothing is retried: the valid orders are recorded and notified, the poison parked
    assert response == {"batchItemFailures": []}
    assert set(world.order_rows()) == {"ok-0", "ok-1"}
    assert sorted(notified_event_ids(world)) == sorted(derive_event_id({"order_id": f"ok-{n}"}) for n in range(2))
    parked = world.dead_letters()
    assert sorted(m["MessageAttributes"]["source_message_id"]["StringValue"] for m in parked) == sorted(
        r["messageId"] for r in poison
    )
    assert {m["MessageAttributes"]["error_code"]["StringValue"] for m in parked} == {"INVALID_MESSAGE"}
    assert "x[0]: 1e999999 is out of range" in " ".join(
        m["MessageAttributes"]["error_message"]["StringValue"] for m in parked
    )


def test_identity_tuples_that_join_alike_get_two_keys(make_world: Any) -> None:
    # GIVEN two identity fields, and two orders whose values join to the same text with a plain "|"
    world: World = make_world(identity_fields="order_id,customer_id")
    left = {"order_id": "o|1", "customer_id": "c"}
    right = {"order_id": "o", "customer_id": "1|c"}
    # WHEN both are delivered
    response = world.invoke([sqs_record(left), sqs_record(right)])
    # THEN both are recorded under distinct keys and notified; nothing is parked as a conflict
    assert response == {"batchItemFailures": []}
    assert world.dead_letters() == []
    fields = ("order_id", "customer_id")
    left_key, right_key = derive_event_id(left, fields), derive_event_id(right, fields)
    assert left_key != right_key
    rows = world.order_rows()
    assert {rows["o|1"]["event_id"], rows["o"]["event_id"]} == {left_key, right_key}
    assert sorted(notified_event_ids(world)) == sorted([left_key, right_key])
    assert {record["status"] for record in world.event_records().values()} == {"sent"}
    # AND the escaping is the documented one: "\" doubled, "|" escaped, then joined with "|"
    assert left_key == hashlib.sha256(b"o\\|1|c").hexdigest()
    assert right_key == hashlib.sha256(b"o|1\\|c").hexdigest()


# Keys computed by the formula before escaping existed (sha256 of the values joined with a plain "|").
OLD_KEY_DEFAULT = "5cbdcb742069a5823a0c64b49ce721b0bca5af9b2517aa95ada5427685fc3383"  # ("o-1",)
OLD_KEY_THREE_FIELDS = "39e1c96fddc0543e0e7a7e9b664738a6b6fcd630b61ed9c7ba4c1925277e4a64"  # ("o-1", "c-9", 10)


@pytest.mark.parametrize(
    ("identity_fields", "order", "old_key"),
    [
        pytest.param(None, {"order_id": "o-1"}, OLD_KEY_DEFAULT, id="default"),
        pytest.param(
            "order_id,customer_id,n",
            {"order_id": "o-1", "customer_id": "c-9", "n": 10.0},
            OLD_KEY_THREE_FIELDS,
            id="three-fields",
        ),
    ],
)
def test_keys_of_values_without_separators_are_the_ones_already_stored(
    make_world: Any, identity_fields: str | None, order: dict[str, Any], old_key: str
) -> None:
    # GIVEN an order whose identity values hold no "|" or "\"
    world: World = make_world(identity_fields=identity_fields)
    # WHEN it is delivered
    assert world.invoke([sqs_record(order)]) == {"batchItemFailures": []}
    # THEN it is recorded under the key the old formula gave (so stored keys keep deduplicating)
    assert set(world.event_records()) == {old_key}
    assert world.order_rows()["o-1"]["event_id"] == old_key


@pytest.mark.parametrize(
    ("body", "attributes"),
    [
        pytest.param('{"order_id": "o-r", "note": "\ud800"}', {}, id="raw-surrogate-in-the-body"),
        pytest.param(
            '{"order_id": "o-a"}', {"trace": {"stringValue": "t-\udfff", "dataType": "String"}}, id="in-an-attribute"
        ),
        pytest.param(
            '{"order_id": "o-k"}',
            {"idempotency_key": {"stringValue": "k-\ud83d", "dataType": "String"}},
            id="in-the-key",
        ),
    ],
)
def test_text_sqs_cannot_carry_is_parked_escaped_not_retried(
    world: World, body: str, attributes: dict[str, Any]
) -> None:
    # GIVEN a hand-built event (a test invoke: SQS itself never delivers it) with a lone surrogate
    # as a raw character, which botocore cannot even encode for the DLQ as it is
    record = sqs_record(body, attributes=attributes)
    # WHEN the handler processes it
    response = world.invoke([record])
    # THEN it is parked at once, with the surrogate written as an escape, and acknowledged
    assert response == {"batchItemFailures": []}
    [parked] = world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE"
    sent = parked["Body"] + json.dumps({k: v.get("StringValue") for k, v in parked["MessageAttributes"].items()})
    assert "\\ud800" in sent or "\\udfff" in sent or "\\ud83d" in sent
    assert world.order_rows() == {}
    assert world.new_notifications() == []


def test_an_attribute_with_a_lone_surrogate_is_named_by_its_first_80_characters() -> None:
    # GIVEN an attribute whose name is 100 characters long and whose value holds a lone surrogate
    name = "n" * 100
    # WHEN the attributes are checked / THEN the error names the attribute by the first 80 characters of its
    # escaped name (a name can be 256 characters), the key and where the surrogate is
    with pytest.raises(InvalidTextError) as raised:
        check_attributes({name: {"dataType": "String", "stringValue": "ab\ud800"}})
    assert str(raised.value) == (
        f"message attribute '{'n' * 79} (stringValue) is not valid Unicode: lone surrogate '\\ud800' at character 2"
    )


def test_a_top_level_field_name_with_a_lone_surrogate_is_named_as_in_the_body() -> None:
    # GIVEN a body whose top-level field name is a JSON escape of a lone surrogate
    # WHEN it is parsed / THEN it is invalid, the error saying the name is in the body itself
    with pytest.raises(InvalidTextError) as raised:
        parse_body('{"order_id": "o-1", "\\ud800x": 1}')
    assert str(raised.value) == "a field name in the body is not valid Unicode: lone surrogate '\\ud800' at character 0"
