"""Idempotency keys and payload fingerprints: the one place producer and consumer derive them.

The idempotency key (stored as ``event_id``) is never the SQS message id, nor the reserved
:data:`~order_consumer.contract.pending_index.CHECKPOINT_EVENT_ID`. It is resolved in order:

1. the body field ``event_id``;
2. the message attribute ``idempotency_key``;
3. the SHA-256 hex digest of the values of the identity fields, in order, each escaped
   (``\\`` -> ``\\\\``, then ``|`` -> ``\\|``) and joined with ``|``, so that distinct tuples of
   values never give one joined text (``("o|1", "c")`` vs ``("o", "1|c")``). A value without ``|``
   or ``\\`` is unchanged by the escaping, so its key is also the one a plain join gives (0.1.0's).

``payload_sha256`` fingerprints the order's content (every body field except ``event_id``) in its
canonical JSON (:mod:`order_consumer.contract.canonical_json`): equal for equal content whatever the
key order, whitespace or number spelling, and different for any two numbers DynamoDB tells apart.
The text checks are in :mod:`~order_consumer.contract.unicode_text`, exact numbers in
:mod:`~order_consumer.contract.dynamodb_numbers`; library users import all of it from
:mod:`idempotent_order_pipeline.keys`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from .canonical_json import canonical_json
from .errors import IdempotencyKeyMismatchError, InvalidMessageError, MissingIdentityFieldError
from .pending_index import CHECKPOINT_EVENT_ID
from .unicode_text import check_identifier, check_text

EVENT_ID_FIELD = "event_id"
IDEMPOTENCY_KEY_ATTRIBUTE = "idempotency_key"
DEFAULT_IDENTITY_FIELDS: tuple[str, ...] = ("order_id",)
IDENTITY_SEPARATOR = "|"
#: Escapes a separator or itself inside an identity value.
IDENTITY_ESCAPE = "\\"
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


def payload_sha256(body: Mapping[str, Any]) -> str:
    """Hex SHA-256 of the canonical JSON of ``body`` without its ``event_id`` field."""
    content = {key: value for key, value in body.items() if key != EVENT_ID_FIELD}
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


# --- keys -------------------------------------------------------------------------------------------


def escape_identity_value(text: str) -> str:
    """``text`` with ``\\`` doubled and ``|`` escaped, so that joined values split back unambiguously."""
    return text.replace(IDENTITY_ESCAPE, IDENTITY_ESCAPE * 2).replace(
        IDENTITY_SEPARATOR, IDENTITY_ESCAPE + IDENTITY_SEPARATOR
    )


def identity_text(values: Sequence[str]) -> str:
    """The text hashed into a derived key: the escaped values joined with ``|``."""
    return IDENTITY_SEPARATOR.join(escape_identity_value(value) for value in values)


def _identity_value(field: str, value: Any) -> str:
    if isinstance(value, str):
        return check_text(value, f"identity field {field!r}")
    return canonical_json(value, [field])


def derive_event_id(order: Mapping[str, Any], identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS) -> str:
    """SHA-256 hex of the identity field values, in order, escaped and joined with ``|``.

    A string value is used as is, any other value as its canonical JSON.

    Raises:
        MissingIdentityFieldError: an identity field is missing, null or empty.
        InvalidMessageError: a value is not valid Unicode or has no canonical JSON.
    """
    values = []
    for field in identity_fields:
        value = order.get(field)
        if value is None or value == "":
            raise MissingIdentityFieldError(
                f"identity field {field!r} is missing or empty; IDENTITY_FIELDS is {','.join(identity_fields)!r}"
            )
        values.append(_identity_value(field, value))
    return hashlib.sha256(identity_text(values).encode("utf-8")).hexdigest()


def _check_key(name: str, key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidMessageError(f"{name} must be a non-empty string, got {key!r:.80}")
    check_identifier(key, name)
    if len(key.encode("utf-8")) > MAX_EVENT_ID_BYTES:
        raise InvalidMessageError(f"{name} is longer than {MAX_EVENT_ID_BYTES} bytes")
    if key == CHECKPOINT_EVENT_ID:
        # The reconciler's checkpoints live under this key in processed_events: never an order's.
        raise InvalidMessageError(f"{name} {key!r} is reserved for the reconciler's checkpoints; use another key")
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
        InvalidMessageError: a given key is empty, not a string, not valid Unicode or too long.
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
