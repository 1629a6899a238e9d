"""Idempotency keys and payload fingerprints: the one place both producer and consumer derive them.

The idempotency key (stored as ``event_id``) is never the SQS message id. It is resolved in order:

1. the body field ``event_id``;
2. the message attribute ``idempotency_key``;
3. the SHA-256 hex digest of the values of the identity fields, in order, joined with ``|``.

``payload_sha256`` fingerprints the order's content (every body field except ``event_id``) in a
canonical JSON form: equal for equal content whatever the key order, whitespace or number spelling
(``10``, ``10.0`` and ``1e1`` are the same DynamoDB number, so they are the same content).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from order_events.errors import (
    IdempotencyKeyMismatchError,
    InvalidMessageError,
    MissingIdentityFieldError,
)

EVENT_ID_FIELD = "event_id"
IDEMPOTENCY_KEY_ATTRIBUTE = "idempotency_key"
DEFAULT_IDENTITY_FIELDS: tuple[str, ...] = ("order_id",)
IDENTITY_SEPARATOR = "|"
# DynamoDB's limit for a partition key value.
MAX_EVENT_ID_BYTES = 2048


def parse_identity_fields(value: str | None) -> tuple[str, ...]:
    """Parse the comma-separated ``IDENTITY_FIELDS`` setting; empty or unset means the default."""
    if value is None or not value.strip():
        return DEFAULT_IDENTITY_FIELDS
    fields = tuple(part.strip() for part in value.split(","))
    if any(not field for field in fields):
        raise ValueError(f"IDENTITY_FIELDS={value!r} has an empty field name; expected e.g. 'order_id,customer_id'")
    return fields


def number_text(value: int | float | Decimal) -> str:
    """The canonical text of a JSON number: no exponent, no trailing zeros, ``0`` for zero."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number")
        value = Decimal(repr(value))
    number = Decimal(value)
    if not number.is_finite():
        raise ValueError(f"{value!r} is not a JSON number")
    if number.is_zero():
        return "0"
    return format(number.normalize(), "f")


def canonical_json(value: Any) -> str:
    """Serialize ``value`` with sorted keys, no whitespace and canonical numbers."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float | Decimal):
        return number_text(value)
    if isinstance(value, Mapping):
        items = sorted(value.items())
        return "{" + ",".join(f"{canonical_json(str(k))}:{canonical_json(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    raise TypeError(f"cannot serialize {type(value).__name__} as JSON")


def payload_sha256(body: Mapping[str, Any]) -> str:
    """Hex SHA-256 of the canonical JSON of ``body`` without its ``event_id`` field."""
    content = {key: value for key, value in body.items() if key != EVENT_ID_FIELD}
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


def _identity_text(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


def derive_event_id(order: Mapping[str, Any], identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS) -> str:
    """SHA-256 hex of the identity field values, in order, joined with ``|``."""
    values = []
    for field in identity_fields:
        value = order.get(field)
        if value is None or value == "":
            raise MissingIdentityFieldError(
                f"identity field {field!r} is missing or empty; IDENTITY_FIELDS is {','.join(identity_fields)!r}"
            )
        values.append(_identity_text(value))
    return hashlib.sha256(IDENTITY_SEPARATOR.join(values).encode("utf-8")).hexdigest()


def _check_key(name: str, key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidMessageError(f"{name} must be a non-empty string, got {key!r:.80}")
    if len(key.encode("utf-8")) > MAX_EVENT_ID_BYTES:
        raise InvalidMessageError(f"{name} is longer than {MAX_EVENT_ID_BYTES} bytes")
    return key


def resolve_event_id(
    body: Mapping[str, Any],
    attribute_key: str | None,
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
) -> str:
    """Resolve the idempotency key of an order message (see the module docstring for the order).

    Raises:
        IdempotencyKeyMismatchError: the body ``event_id`` and the attribute both exist and differ.
        MissingIdentityFieldError: neither exists and an identity field is missing.
        InvalidMessageError: a given key is empty, not a string or too long.
    """
    body_key = None if EVENT_ID_FIELD not in body else _check_key("body field 'event_id'", body[EVENT_ID_FIELD])
    attr_key = (
        None if attribute_key is None else _check_key(f"message attribute {IDEMPOTENCY_KEY_ATTRIBUTE!r}", attribute_key)
    )
    if body_key is not None and attr_key is not None and body_key != attr_key:
        raise IdempotencyKeyMismatchError(
            f"body event_id {body_key!r:.80} differs from the {IDEMPOTENCY_KEY_ATTRIBUTE} attribute {attr_key!r:.80}"
        )
    return body_key or attr_key or derive_event_id(body, identity_fields)
