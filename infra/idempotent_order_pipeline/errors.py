"""The pipeline's domain errors for library users (producer, CLI): :mod:`order_consumer.contract.errors` re-exported.

One module defines them all (inside the Lambda asset, since the consumer raises them too); catching
``idempotent_order_pipeline.errors.InvalidMessageError`` catches what the producer raises.
"""

from __future__ import annotations

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import (
    ConfigurationError,
    IdempotencyConflictError,
    IdempotencyKeyMismatchError,
    InvalidMessageError,
    InvalidNumberError,
    InvalidTextError,
    ItemTooLargeError,
    MessageTooLargeError,
    MissingIdentityFieldError,
    OrderPipelineError,
    OrderSendError,
    PermanentError,
    RejectedByStoreError,
    SchemaViolationError,
    StoreUnavailableError,
    TransientError,
    UnserializableValueError,
)

__all__ = [
    "ConfigurationError",
    "IdempotencyConflictError",
    "IdempotencyKeyMismatchError",
    "InvalidMessageError",
    "InvalidNumberError",
    "InvalidTextError",
    "ItemTooLargeError",
    "MessageTooLargeError",
    "MissingIdentityFieldError",
    "OrderPipelineError",
    "OrderSendError",
    "PermanentError",
    "RejectedByStoreError",
    "SchemaViolationError",
    "StoreUnavailableError",
    "TransientError",
    "UnserializableValueError",
]
