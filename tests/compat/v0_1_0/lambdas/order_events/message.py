"""The order message contract: parse and validate one SQS record into an :class:`OrderMessage`.

Body: a JSON object, the order itself, with ``order_id`` (non-empty string, at most 256
characters) and an optional ``event_id``. Numbers are kept as :class:`~decimal.Decimal`, exactly as
sent, and must fit DynamoDB's number type. The key is resolved by :mod:`order_events.keys`.
Everything that breaks the contract raises :class:`~order_events.errors.InvalidMessageError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, DecimalException
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from order_events.errors import InvalidMessageError, ItemTooLargeError
from order_events.keys import (
    DEFAULT_IDENTITY_FIELDS,
    EVENT_ID_FIELD,
    IDEMPOTENCY_KEY_ATTRIBUTE,
    payload_sha256,
    resolve_event_id,
)

ORDER_ID_FIELD = "order_id"
PAYLOAD_SHA256_FIELD = "payload_sha256"
MAX_ORDER_ID_LENGTH = 256
# DynamoDB allows 32 levels of nested maps and lists.
MAX_NESTING_DEPTH = 32
# DynamoDB's item size limit (attribute names and values, UTF-8).
MAX_ITEM_BYTES = 400 * 1024

_serializer = TypeSerializer()

AttributeValue = dict[str, Any]


@dataclass(frozen=True)
class OrderMessage:
    """One valid order message, ready to be stored."""

    event_id: str
    order_id: str
    payload_sha256: str
    #: The order row as DynamoDB attribute values: the body's fields, ``event_id``, ``payload_sha256``.
    order_item: dict[str, AttributeValue] = field(repr=False)


def _reject_constant(name: str) -> Any:
    raise InvalidMessageError(f"body contains {name}, which is not a JSON number DynamoDB can store")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidMessageError(f"body has the key {key!r:.80} twice")
        result[key] = value
    return result


def _check_structure(order: Mapping[str, Any]) -> None:
    """Reject nesting deeper than DynamoDB allows and empty names (attribute or map key) at any level."""
    stack: list[tuple[Any, int]] = [(order, 0)]
    while stack:
        value, level = stack.pop()
        children: Iterable[Any]
        if isinstance(value, dict):
            if "" in value:
                raise InvalidMessageError("body has a field with an empty name; DynamoDB names need 1 character")
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if level > MAX_NESTING_DEPTH:
            raise InvalidMessageError(f"body is nested deeper than DynamoDB's {MAX_NESTING_DEPTH} levels")
        stack.extend((child, level + 1) for child in children)


def parse_body(body: str) -> dict[str, Any]:
    """Parse the JSON body into a dict, numbers as Decimal; raise InvalidMessageError otherwise."""
    try:
        order = json.loads(
            body,
            parse_float=Decimal,
            parse_int=Decimal,
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_keys,
        )
    except InvalidMessageError:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise InvalidMessageError(f"body is not valid JSON: {exc}"[:300]) from exc
    if not isinstance(order, dict):
        raise InvalidMessageError(f"body must be a JSON object, got {type(order).__name__}")
    return order


def _attribute_size(value: AttributeValue) -> int:
    """Bytes DynamoDB counts for one attribute value (its documented item size rules)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        digits = len(inner.lstrip("-").replace(".", "").split("E")[0].strip("0")) or 1
        return (digits + 1) // 2 + 1
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _attribute_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + _attribute_size(v) for k, v in inner.items())
    raise ValueError(f"unexpected attribute type {kind}")


def item_size(item: Mapping[str, AttributeValue]) -> int:
    """Bytes DynamoDB counts for an item."""
    return sum(len(name.encode("utf-8")) + _attribute_size(value) for name, value in item.items())


def _to_item(order: Mapping[str, Any]) -> dict[str, AttributeValue]:
    try:
        return {key: dict(_serializer.serialize(value)) for key, value in order.items()}
    except (TypeError, ValueError, DecimalException) as exc:
        raise InvalidMessageError(f"body has a value DynamoDB cannot store: {exc!r}"[:300]) from exc


def string_attribute(attributes: Mapping[str, Any], name: str) -> str | None:
    """The value of a String message attribute of a Lambda SQS record, None if absent."""
    attribute = attributes.get(name)
    if attribute is None:
        return None
    if not isinstance(attribute, Mapping) or attribute.get("dataType", "String").split(".")[0] != "String":
        raise InvalidMessageError(f"message attribute {name!r} must be of type String")
    value = attribute.get("stringValue")
    if not isinstance(value, str):
        raise InvalidMessageError(f"message attribute {name!r} has no string value")
    return value


def parse_order_message(
    body: str,
    attributes: Mapping[str, Any] | None = None,
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
) -> OrderMessage:
    """Validate one message against the contract and build the order row to store.

    Args:
        body: the SQS message body.
        attributes: the record's ``messageAttributes`` in the Lambda event shape.
        identity_fields: fields hashed into the key when neither ``event_id`` nor the attribute is set.

    Raises:
        InvalidMessageError: the message breaks the contract (the message says how).
        ItemTooLargeError: the order row would exceed DynamoDB's 400 KB item limit.
    """
    order = parse_body(body)
    order_id = order.get(ORDER_ID_FIELD)
    if not isinstance(order_id, str) or not order_id:
        raise InvalidMessageError(f"body field 'order_id' must be a non-empty string, got {order_id!r:.80}")
    if len(order_id) > MAX_ORDER_ID_LENGTH:
        raise InvalidMessageError(
            f"body field 'order_id' has {len(order_id)} characters; at most {MAX_ORDER_ID_LENGTH} are allowed"
        )
    if PAYLOAD_SHA256_FIELD in order:
        raise InvalidMessageError(f"body field {PAYLOAD_SHA256_FIELD!r} is reserved for the pipeline")
    _check_structure(order)

    event_id = resolve_event_id(order, string_attribute(attributes or {}, IDEMPOTENCY_KEY_ATTRIBUTE), identity_fields)
    fingerprint = payload_sha256(order)
    row = {**order, EVENT_ID_FIELD: event_id, PAYLOAD_SHA256_FIELD: fingerprint}
    item = _to_item(row)
    size = item_size(item)
    if size > MAX_ITEM_BYTES:
        raise ItemTooLargeError(
            f"the order row would be {size} bytes; DynamoDB allows 400 KB ({MAX_ITEM_BYTES} bytes) per item"
        )
    return OrderMessage(event_id=event_id, order_id=order_id, payload_sha256=fingerprint, order_item=item)
