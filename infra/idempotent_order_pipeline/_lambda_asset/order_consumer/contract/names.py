"""The names several parts must spell alike: record statuses, environment variables, stack outputs.

Each is a contract between two or more of the consumer, the reconciler, the construct, ``app.py``,
the operator CLI and the sandbox, and outside code relies on them too: never rename one. The
pending index's names are in :mod:`order_consumer.contract.pending_index`, the parking envelope's
in :mod:`order_consumer.contract.parked`, the metrics' in :mod:`order_consumer.contract.metric_names`.

Standard library only (no imports at all): the Lambda asset ships it, and the construct, the CLI and
the sandbox import it from the distribution.
"""

from __future__ import annotations

# --- the state record's ``status`` (processed_events) ------------------------------------------------

#: Recorded (the order row and the state record are written); SNS has not accepted the notification yet.
STATUS_PENDING = "pending"
#: SNS accepted the notification; the record expires with its ``ttl``.
STATUS_SENT = "sent"

# --- the functions' environment, set by the construct ------------------------------------------------

PROCESSED_EVENTS_TABLE_VARIABLE = "PROCESSED_EVENTS_TABLE"
ORDER_RECORDS_TABLE_VARIABLE = "ORDER_RECORDS_TABLE"
TOPIC_ARN_VARIABLE = "TOPIC_ARN"
DEAD_LETTER_QUEUE_URL_VARIABLE = "DEAD_LETTER_QUEUE_URL"
#: Seconds a ``sent`` record is kept before DynamoDB's TTL deletes it.
RECORD_TTL_SECONDS_VARIABLE = "RECORD_TTL_SECONDS"
#: The comma-separated fields a key is derived from when a message carries none.
IDENTITY_FIELDS_VARIABLE = "IDENTITY_FIELDS"
#: The configured notification attributes: a JSON array of field paths (absent or empty: none).
NOTIFICATION_ATTRIBUTES_VARIABLE = "NOTIFICATION_ATTRIBUTES"
#: The notification body, ``thin`` or ``order`` (absent: ``thin``).
NOTIFICATION_BODY_VARIABLE = "NOTIFICATION_BODY"
#: The reconciler's only variable on top of the consumer's: how long a record must have been pending.
RECONCILE_AFTER_VARIABLE = "RECONCILE_AFTER_SECONDS"
#: What the consumer cannot start without.
REQUIRED_VARIABLES = (
    PROCESSED_EVENTS_TABLE_VARIABLE,
    ORDER_RECORDS_TABLE_VARIABLE,
    TOPIC_ARN_VARIABLE,
    DEAD_LETTER_QUEUE_URL_VARIABLE,
)

# --- the outputs of app.py's stack (read by the sandbox and the CLI) ----------------------------------

QUEUE_URL_OUTPUT = "QueueUrl"
DEAD_LETTER_QUEUE_URL_OUTPUT = "DeadLetterQueueUrl"
PROCESSED_EVENTS_TABLE_OUTPUT = "ProcessedEventsTableName"
ORDER_RECORDS_TABLE_OUTPUT = "OrderRecordsTableName"
TOPIC_ARN_OUTPUT = "TopicArn"
FUNCTION_NAME_OUTPUT = "FunctionName"
#: Every output ``app.py``'s stack declares.
STACK_OUTPUTS = (
    QUEUE_URL_OUTPUT,
    DEAD_LETTER_QUEUE_URL_OUTPUT,
    PROCESSED_EVENTS_TABLE_OUTPUT,
    ORDER_RECORDS_TABLE_OUTPUT,
    TOPIC_ARN_OUTPUT,
    FUNCTION_NAME_OUTPUT,
)
