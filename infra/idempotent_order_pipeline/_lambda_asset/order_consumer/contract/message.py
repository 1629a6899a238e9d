"""The order message contract: parse and validate one SQS record into an :class:`OrderMessage`.

Body: a JSON object, the order itself, with ``order_id`` (non-empty string, at most 256
characters) and an optional ``event_id``. The key is resolved by :mod:`order_consumer.contract.keys`.

Everything that can never be stored is refused here, before any AWS call, as a
:class:`~order_consumer.contract.errors.PermanentError` (parked at once, never retried) whose message names
the field's path (``items[2].price``):

* numbers are read from their literal text (:func:`order_consumer.contract.keys.number_from_literal`): the
  exponent's size is checked before it is converted and no digit is ever expanded, then the value
  must fit DynamoDB's number type after trimming zeros (:class:`~order_consumer.contract.errors.InvalidNumberError`);
  valid ones are kept as exact :class:`~decimal.Decimal` values and stored as their canonical text;
* strings, field names, map keys and message attributes must be valid Unicode - no lone surrogate,
  which JSON can spell as ``"\\ud800"`` in plain ASCII (:class:`~order_consumer.contract.errors.InvalidTextError`);
* nesting is at most DynamoDB's 32 levels, names are non-empty, keys unique, the row at most 400 KB.

Bodies up to SQS's 256 KB stay small in memory: a bad number is kept as its literal until the walk
names it, equal literals share one value, equal scalars one attribute value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from .canonical_json import MAX_NESTING_DEPTH, path_text
from .dynamodb_numbers import number_from_literal, number_text
from .errors import (
    InvalidMessageError,
    InvalidNumberError,
    InvalidTextError,
    ItemTooLargeError,
    UnserializableValueError,
)
from .keys import DEFAULT_IDENTITY_FIELDS, EVENT_ID_FIELD, IDEMPOTENCY_KEY_ATTRIBUTE, payload_sha256, resolve_event_id
from .parked import producer_attributes
from .unicode_text import check_identifier, check_text, is_valid_text

ORDER_ID_FIELD = "order_id"
PAYLOAD_SHA256_FIELD = "payload_sha256"
MAX_ORDER_ID_LENGTH = 256
# DynamoDB's item size limit (attribute names and values, UTF-8).
MAX_ITEM_BYTES = 400 * 1024

AttributeValue = dict[str, Any]


@dataclass(frozen=True)
class OrderMessage:
    """One valid order message, ready to be stored."""

    event_id: str
    order_id: str
    payload_sha256: str
    #: The order row as DynamoDB attribute values: the body's fields, ``event_id``, ``payload_sha256``.
    order_item: dict[str, AttributeValue] = field(repr=False)
    #: The order row's size as DynamoDB counts it (attribute names and values), kept when the row is dropped.
    item_bytes: int = 0

    def without_item(self) -> OrderMessage:
        """The same message without its order row (once written, only the ids are needed; the row can be big)."""
        return replace(self, order_item={})


def _reject_constant(name: str) -> Any:
    raise InvalidNumberError(f"body contains {name}, which is not a JSON number DynamoDB can store")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidMessageError(f"body has the key {key!r:.80} twice")
        result[key] = value
    return result


class _BadNumber:
    """A number literal the body cannot hold, left in place by the parser so the walk can name its path.

    Only the literal is kept (not the exception, whose traceback would hold the parser's frames):
    a body of 29,000 such literals costs a few MB, and the reason is rebuilt for the first one.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def error(self) -> InvalidNumberError:
        try:
            number_from_literal(self.text)
        except InvalidNumberError as exc:
            return exc
        raise AssertionError(f"{self.text!r:.80} was refused by the parser but is valid")  # pragma: no cover


class _NumberParser:
    """json's parse_int / parse_float hook for one body: exact values, one object per distinct literal."""

    def __init__(self) -> None:
        self._seen: dict[str, Decimal | _BadNumber] = {}

    def __call__(self, text: str) -> Decimal | _BadNumber:
        value = self._seen.get(text)
        if value is None:
            try:
                value = number_from_literal(text)
            except InvalidNumberError:
                value = _BadNumber(text)
            self._seen[text] = value
        return value


_Path = tuple[Any, str | int] | None  # (parent path, name or index): built per node, rendered on error only


def _path_list(path: _Path) -> list[str | int]:
    parts: list[str | int] = []
    while path is not None:
        path, part = path
        parts.append(part)
    return parts[::-1]


def _where(path: _Path) -> str:
    return path_text(_path_list(path))


def _check_scalar(value: Any, path: _Path) -> None:
    if isinstance(value, str):
        if not is_valid_text(value):
            check_text(value, _where(path))
    elif isinstance(value, _BadNumber):
        raise InvalidNumberError(f"{_where(path)}: {value.error()}")


def _check_structure(order: Mapping[str, Any]) -> None:
    """Walk the whole body once; raise for the first thing found that DynamoDB cannot store.

    Nesting deeper than DynamoDB allows, empty names, names and strings that are not valid
    Unicode, and numbers out of DynamoDB's range or precision - each named by its path
    (``items[2].price``). Scalars are checked in place; only containers are queued.
    """
    stack: list[tuple[Any, int, _Path]] = [(order, 0, None)]
    while stack:
        value, level, path = stack.pop()
        if level > MAX_NESTING_DEPTH:
            raise InvalidMessageError(f"{_where(path)} is nested deeper than DynamoDB's {MAX_NESTING_DEPTH} levels")
        containers: list[tuple[Any, int, _Path]] = []
        if isinstance(value, dict):
            for name, child in value.items():
                if name == "":
                    raise InvalidMessageError(
                        f"{_where(path) if path else 'body'} has a field with an empty name; "
                        "DynamoDB names need 1 character"
                    )
                if not is_valid_text(name):
                    check_text(name, f"a field name in {_where(path) if path else 'the body'}")
                if isinstance(child, dict | list):
                    containers.append((child, level + 1, (path, name)))
                else:
                    _check_scalar(child, (path, name))
        else:
            for index, child in enumerate(value):
                if isinstance(child, dict | list):
                    containers.append((child, level + 1, (path, index)))
                else:
                    _check_scalar(child, (path, index))
        stack.extend(reversed(containers))


def parse_body(body: str) -> dict[str, Any]:
    """Parse the JSON body into a dict, numbers as exact Decimal; raise InvalidMessageError otherwise.

    Numbers are checked from their text (:func:`order_consumer.contract.keys.number_from_literal`) and strings
    for valid Unicode, so nothing that can never be stored gets past this point.
    """
    if not is_valid_text(body):
        check_text(body, "body")
    numbers = _NumberParser()
    try:
        order = json.loads(
            body,
            parse_float=numbers,
            parse_int=numbers,
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_keys,
        )
    except InvalidMessageError:
        raise
    except json.JSONDecodeError as exc:
        # Where in the body, by column on a one-line body: a caller numbering its own lines (the CLI's
        # send) then names one line number, not its own and JSON's "line 1".
        where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno} of the body"
        raise InvalidMessageError(f"body is not valid JSON: {exc.msg} at {where}"[:300]) from exc
    except (ValueError, RecursionError) as exc:
        raise InvalidMessageError(f"body is not valid JSON: {exc}"[:300]) from exc
    if not isinstance(order, dict):
        if isinstance(order, _BadNumber):
            raise InvalidNumberError(f"body must be a JSON object, got a number: {order.error()}")
        raise InvalidMessageError(f"body must be a JSON object, got {type(order).__name__}")
    _check_structure(order)
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


def attribute_value(value: Any, _scalars: dict[Any, AttributeValue] | None = None) -> AttributeValue:
    """A parsed JSON value as a DynamoDB attribute value; numbers as their exact canonical text.

    Not boto3's TypeSerializer: its 38-digit context cannot write every number DynamoDB stores
    (it underflows on 38 digits near 1E-130). Equal numbers, booleans and nulls share one
    attribute value object within one call (a body of 130,000 zeros holds one ``{"N": "0"}``),
    so treat the result as read-only.
    """
    scalars = {} if _scalars is None else _scalars
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, Mapping):
        return {"M": {name: attribute_value(child, scalars) for name, child in value.items()}}
    if isinstance(value, list):
        return {"L": [attribute_value(child, scalars) for child in value]}
    key: tuple[Any, ...]
    inner: bool | str
    if value is None:
        key, kind, inner = ("NULL",), "NULL", True
    elif isinstance(value, bool):
        key, kind, inner = ("BOOL", value), "BOOL", value
    elif isinstance(value, int | Decimal):
        text = number_text(value)
        key, kind, inner = ("N", text), "N", text
    else:
        raise UnserializableValueError(f"cannot store {type(value).__name__} in DynamoDB")
    shared = scalars.get(key)
    if shared is None:
        shared = scalars[key] = {kind: inner}
    return shared


def from_attribute_value(value: AttributeValue) -> Any:
    """A DynamoDB attribute value as Python: numbers as exact Decimal, whatever their size (DynamoDB
    returns ``1E+41`` as 42 digits, which boto3's 38-digit deserializer refuses, boto/boto3#2500),
    binary as bytes, sets as sets.

    Standard library only (boto3's ``TypeDeserializer`` would import boto3 and s3transfer into the
    consumer's cold start for this alone).
    """
    ((kind, inner),) = value.items()
    if kind in ("S", "BOOL"):
        return inner
    if kind == "N":
        return Decimal(inner)
    if kind == "B":
        return bytes(inner)
    if kind == "NULL":
        return None
    if kind == "M":
        return {name: from_attribute_value(child) for name, child in inner.items()}
    if kind == "L":
        return [from_attribute_value(child) for child in inner]
    if kind == "SS":
        return set(inner)
    if kind == "NS":
        return {Decimal(number) for number in inner}
    if kind == "BS":
        return {bytes(member) for member in inner}
    raise TypeError(f"unknown DynamoDB attribute type {kind!r}")


def _to_item(order: Mapping[str, Any]) -> dict[str, AttributeValue]:
    scalars: dict[Any, AttributeValue] = {}
    return {key: attribute_value(value, scalars) for key, value in order.items()}


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
    return check_text(value, f"message attribute {name!r}")


def check_attributes(attributes: Mapping[str, Any]) -> None:
    """Reject message attributes whose name or string value is not valid Unicode (it can never be stored or parked)."""
    for name, attribute in attributes.items():
        if not isinstance(name, str) or not is_valid_text(name):
            raise InvalidTextError(f"a message attribute name is not valid Unicode: {ascii(name)[:80]}")
        if isinstance(attribute, Mapping):
            for key in ("stringValue", "dataType"):
                text = attribute.get(key)
                if isinstance(text, str) and not is_valid_text(text):
                    check_text(text, f"message attribute {ascii(name)[:80]} ({key})")


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
    check_identifier(order_id, "body field 'order_id'")
    if PAYLOAD_SHA256_FIELD in order:
        raise InvalidMessageError(f"body field {PAYLOAD_SHA256_FIELD!r} is reserved for the pipeline")
    # A message a move task brought back from the DLQ carries the consumer's envelope: its packed
    # originals (the idempotency key among them) are the producer's attributes.
    check_attributes(attributes or {})
    originals = producer_attributes(attributes or {})
    check_attributes(originals)
    event_id = resolve_event_id(order, string_attribute(originals, IDEMPOTENCY_KEY_ATTRIBUTE), identity_fields)
    fingerprint = payload_sha256(order)
    row = {**order, EVENT_ID_FIELD: event_id, PAYLOAD_SHA256_FIELD: fingerprint}
    item = _to_item(row)
    size = item_size(item)
    if size > MAX_ITEM_BYTES:
        raise ItemTooLargeError(
            f"the order row would be {size} bytes; DynamoDB allows 400 KB ({MAX_ITEM_BYTES} bytes) per item"
        )
    return OrderMessage(
        event_id=event_id, order_id=order_id, payload_sha256=fingerprint, order_item=item, item_bytes=size
    )
