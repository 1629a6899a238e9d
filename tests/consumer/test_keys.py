"""Idempotency key derivation and payload fingerprints: table-driven."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.canonical_json import canonical_json
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import (
    IdempotencyKeyMismatchError,
    InvalidMessageError,
    MissingIdentityFieldError,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import (
    derive_event_id,
    parse_identity_fields,
    payload_sha256,
    resolve_event_id,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_body, string_attribute
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import CHECKPOINT_EVENT_ID


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    ("body", "attribute", "fields", "expected"),
    [
        pytest.param({"order_id": "o", "event_id": "e-body"}, None, ("order_id",), "e-body", id="body-event-id"),
        pytest.param({"order_id": "o"}, "e-attr", ("order_id",), "e-attr", id="attribute"),
        pytest.param({"order_id": "o", "event_id": "e"}, "e", ("order_id",), "e", id="body-and-attribute-agree"),
        pytest.param({"order_id": "o-1"}, None, ("order_id",), sha("o-1"), id="derived-one-field"),
        pytest.param(
            {"order_id": "o-1", "customer": "c"}, None, ("order_id", "customer"), sha("o-1|c"), id="derived-in-order"
        ),
        pytest.param(
            {"order_id": "o-1", "customer": "c"}, None, ("customer", "order_id"), sha("c|o-1"), id="field-order-matters"
        ),
        pytest.param({"order_id": "o", "n": Decimal("10.0")}, None, ("order_id", "n"), sha("o|10"), id="number-canon"),
        pytest.param({"order_id": "o", "n": 10}, None, ("order_id", "n"), sha("o|10"), id="int-like-decimal"),
    ],
)
def test_key_resolution(body: dict[str, Any], attribute: str | None, fields: tuple[str, ...], expected: str) -> None:
    # GIVEN a body, an optional attribute and identity fields / WHEN resolved / THEN the expected key
    assert resolve_event_id(body, attribute, fields) == expected


@pytest.mark.parametrize(
    ("body", "attribute", "fields", "error", "match"),
    [
        pytest.param({"order_id": "o", "event_id": "a"}, "b", ("order_id",), IdempotencyKeyMismatchError, "differs"),
        pytest.param({"order_id": "o"}, None, ("order_id", "customer"), MissingIdentityFieldError, "'customer'"),
        pytest.param({"order_id": ""}, None, ("order_id",), MissingIdentityFieldError, "'order_id'"),
        pytest.param({"order_id": "o", "event_id": ""}, None, ("order_id",), InvalidMessageError, "event_id"),
        pytest.param({"order_id": "o"}, "", ("order_id",), InvalidMessageError, "idempotency_key"),
        pytest.param({"order_id": "o", "event_id": "x" * 2049}, None, ("order_id",), InvalidMessageError, "2048"),
        pytest.param(
            {"order_id": "o", "event_id": CHECKPOINT_EVENT_ID},
            None,
            ("order_id",),
            InvalidMessageError,
            "reserved for the reconciler's checkpoints",
            id="the-checkpoint-key-in-the-body",
        ),
        pytest.param(
            {"order_id": "o"},
            CHECKPOINT_EVENT_ID,
            ("order_id",),
            InvalidMessageError,
            "attribute 'idempotency_key' 'order-pipeline:reconciler-checkpoint' is reserved",
            id="the-checkpoint-key-as-attribute",
        ),
    ],
)
def test_key_resolution_errors(
    body: dict[str, Any], attribute: str | None, fields: tuple[str, ...], error: type[Exception], match: str
) -> None:
    # GIVEN an inconsistent or incomplete message / WHEN resolved / THEN a named, explained error
    with pytest.raises(error, match=match):
        resolve_event_id(body, attribute, fields)


def test_producer_and_consumer_derive_the_same_key() -> None:
    # GIVEN an order as a producer holds it (Python numbers) and as the consumer parses it (Decimal)
    producer_side = {"order_id": "o-7", "total": 10.5, "count": 3}
    consumer_side = parse_body('{"count": 3, "total": 10.50, "order_id": "o-7"}')
    fields = ("order_id", "total", "count")
    # WHEN both derive the key and the fingerprint
    # THEN they agree
    assert derive_event_id(producer_side, fields) == derive_event_id(consumer_side, fields)
    assert payload_sha256(producer_side) == payload_sha256(consumer_side)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ('{"order_id":"o","a":1,"b":[1,2]}', '{ "b" : [1, 2], "a": 1, "order_id": "o" }'),
        ('{"order_id":"o","a":1}', '{"order_id":"o","a":1.0}'),
        ('{"order_id":"o","a":100}', '{"order_id":"o","a":1e2}'),
        ('{"order_id":"o","event_id":"e1"}', '{"order_id":"o","event_id":"e2"}'),
        ('{"order_id":"o","t":"\\u00e9"}', '{"order_id":"o","t":"\u00e9"}'),
    ],
)
def test_fingerprint_ignores_key_order_whitespace_number_spelling_and_event_id(left: str, right: str) -> None:
    # GIVEN two spellings of the same content / WHEN fingerprinted / THEN equal
    assert payload_sha256(parse_body(left)) == payload_sha256(parse_body(right))


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ('{"order_id":"o","a":1}', '{"order_id":"o","a":2}'),
        ('{"order_id":"o","a":1}', '{"order_id":"o","a":"1"}'),
        ('{"order_id":"o","a":[1,2]}', '{"order_id":"o","a":[2,1]}'),
        ('{"order_id":"o","a":null}', '{"order_id":"o"}'),
    ],
)
def test_fingerprint_changes_with_content(left: str, right: str) -> None:
    # GIVEN two different contents / WHEN fingerprinted / THEN different
    assert payload_sha256(parse_body(left)) != payload_sha256(parse_body(right))


def test_canonical_json_is_compact_and_sorted() -> None:
    # GIVEN nested content / WHEN serialized / THEN sorted keys, no whitespace, canonical numbers
    assert canonical_json({"b": [Decimal("1.50"), True, None], "a": "x"}) == '{"a":"x","b":[1.5,true,null]}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ("order_id",)), ("", ("order_id",)), ("order_id", ("order_id",)), (" a , b ", ("a", "b"))],
)
def test_identity_fields_setting(value: str | None, expected: tuple[str, ...]) -> None:
    assert parse_identity_fields(value) == expected


def test_identity_fields_setting_rejects_empty_names() -> None:
    with pytest.raises(ValueError, match="IDENTITY_FIELDS='a,,b' has an empty field name"):
        parse_identity_fields("a,,b")


@pytest.mark.parametrize(
    ("attribute", "expected"),
    [
        pytest.param({"dataType": "String", "stringValue": "k-1"}, "k-1", id="string"),
        pytest.param({"dataType": "String.uuid", "stringValue": "k-1"}, "k-1", id="string-with-a-custom-type"),
        pytest.param({"stringValue": "k-1"}, "k-1", id="no-type-in-a-hand-built-event"),
    ],
)
def test_the_idempotency_key_attribute_is_read_from_any_string_type(attribute: dict[str, str], expected: str) -> None:
    # GIVEN an idempotency_key attribute of type String, String.<custom> or no type / WHEN read / THEN its value
    assert string_attribute({"idempotency_key": attribute}, "idempotency_key") == expected


@pytest.mark.parametrize("data_type", ["Number", "Binary", "Number.String"])
def test_an_idempotency_key_attribute_of_another_type_is_invalid(data_type: str) -> None:
    # GIVEN an idempotency_key attribute of a type that is not String / WHEN read / THEN the message is invalid
    with pytest.raises(InvalidMessageError, match="message attribute 'idempotency_key' must be of type String"):
        string_attribute({"idempotency_key": {"dataType": data_type, "stringValue": "1"}}, "idempotency_key")
