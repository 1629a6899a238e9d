"""Idempotency keys and payload fingerprints for producers: the very functions the consumer runs.

This module re-exports :mod:`order_consumer.contract.keys` (with the canonical JSON and exact numbers
they rest on) from the Lambda asset shipped inside this package (``idempotent_order_pipeline._lambda_asset``),
so a producer and the consumer can never derive different keys for one order: there is one
implementation, not a copy.
"""

from __future__ import annotations

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.canonical_json import canonical_json
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.dynamodb_numbers import (
    MAX_SIGNIFICANT_DIGITS,
    number_from_literal,
    number_text,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import (
    DEFAULT_IDENTITY_FIELDS,
    EVENT_ID_FIELD,
    IDEMPOTENCY_KEY_ATTRIBUTE,
    IDENTITY_ESCAPE,
    IDENTITY_SEPARATOR,
    MAX_EVENT_ID_BYTES,
    derive_event_id,
    escape_identity_value,
    identity_text,
    parse_identity_fields,
    payload_sha256,
    resolve_event_id,
)

__all__ = [
    "DEFAULT_IDENTITY_FIELDS",
    "EVENT_ID_FIELD",
    "IDEMPOTENCY_KEY_ATTRIBUTE",
    "IDENTITY_ESCAPE",
    "IDENTITY_SEPARATOR",
    "MAX_EVENT_ID_BYTES",
    "MAX_SIGNIFICANT_DIGITS",
    "canonical_json",
    "derive_event_id",
    "escape_identity_value",
    "identity_text",
    "number_from_literal",
    "number_text",
    "parse_identity_fields",
    "payload_sha256",
    "resolve_event_id",
]
