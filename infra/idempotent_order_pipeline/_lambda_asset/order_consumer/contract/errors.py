"""Every domain error of the order pipeline, under one base class.

Callers branch on these classes, never on botocore error codes: the store and the pending-index
reader translate low-level errors with ``raise ... from exc``; the notifier and the dead-letter
queue report a failed entry as its result instead, so one refused entry never fails the others.

Two families decide what happens to an SQS record:

* :class:`PermanentError` - retrying cannot help; the record is parked in the dead-letter queue at
  once with ``error_code`` and acknowledged.
* :class:`TransientError` - the record is reported in ``batchItemFailures`` and SQS redelivers it
  (after ``maxReceiveCount`` receives the queue's redrive policy moves it to the DLQ).
"""

from __future__ import annotations


class OrderPipelineError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigurationError(OrderPipelineError):
    """The function is misconfigured (for example a required environment variable is missing)."""


class PermanentError(OrderPipelineError):
    """Retrying cannot help: park the message in the DLQ with ``error_code`` and acknowledge it."""

    error_code = "PERMANENT_FAILURE"


class InvalidMessageError(PermanentError):
    """The SQS message does not follow the order message contract."""

    error_code = "INVALID_MESSAGE"


class IdempotencyKeyMismatchError(InvalidMessageError):
    """The body's ``event_id`` and the ``idempotency_key`` attribute are both set and differ."""


class MissingIdentityFieldError(InvalidMessageError):
    """An identity field needed to derive the idempotency key is missing or empty."""


class InvalidNumberError(InvalidMessageError, ValueError):
    """A number DynamoDB cannot store exactly: over 38 significant digits, out of range, or not finite."""


class InvalidTextError(InvalidMessageError, ValueError):
    """A string, field name or attribute is not valid Unicode (a lone surrogate): it has no UTF-8 form."""


class UnserializableValueError(InvalidMessageError, TypeError):
    """A value has no JSON form (a datetime, a set, a non-string field name, a cycle, ...)."""


class SchemaViolationError(PermanentError):
    """The order breaks the pipeline's ``order_schema`` (the message names the JSON path and the rule)."""

    error_code = "SCHEMA_VIOLATION"


class ItemTooLargeError(PermanentError):
    """The order would exceed DynamoDB's 400 KB item size limit."""

    error_code = "ITEM_TOO_LARGE"


class MessageTooLargeError(PermanentError):
    """A parked message is larger than the orders queue's ``MaximumMessageSize``: no redrive can send it back."""

    error_code = "MESSAGE_TOO_LARGE"


class RejectedByStoreError(PermanentError):
    """DynamoDB rejected the write as invalid (ValidationException): the same write always fails."""

    error_code = "VALIDATION_FAILED"


class IdempotencyConflictError(PermanentError):
    """The idempotency key or the order id is already recorded with a different payload."""

    error_code = "IDEMPOTENCY_CONFLICT"


class TransientError(OrderPipelineError):
    """A retry may succeed: report the record in ``batchItemFailures`` so that SQS redelivers it."""


class StoreUnavailableError(TransientError):
    """DynamoDB did not apply the write: throttling, a transaction conflict, a 5xx or a network error."""


class OrderSendError(OrderPipelineError):
    """SQS did not accept an order message from the producer (after the client's own retries)."""


class ReconciliationFailedError(OrderPipelineError):
    """A reconciliation run ended on an unforeseen error; its metrics went out, the invocation fails."""
