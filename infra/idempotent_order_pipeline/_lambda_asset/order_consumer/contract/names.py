"""The names several parts must spell alike: record statuses, environment variables, stack outputs.

Each is a contract between two or more of the consumer, the reconciler, the construct, ``app.py``,
the operator CLI and the sandbox, and outside code relies on them too: never rename one. The
pending index's names are in :mod:`order_consumer.contract.pending_index`, the parking envelope's
in :mod:`order_consumer.contract.parked`, the metrics' in :mod:`order_consumer.contract.metric_names`.

Standard library only (it imports only the pending index's names): the Lambda asset ships it, and
the construct, the CLI and the sandbox import it from the distribution.
"""

from __future__ import annotations

from enum import StrEnum

from .pending_index import PENDING_SHARD_ATTRIBUTE, PENDING_SINCE_ATTRIBUTE

# --- the state record's ``status`` (processed_events) ------------------------------------------------


class Status(StrEnum):
    """A state record's ``status``: the only values the consumer, the reconciler and the CLI write or read."""

    #: Recorded (the order row and the state record are written); SNS has not accepted the notification yet.
    PENDING = "pending"
    #: SNS accepted the notification; the record expires with its ``ttl``.
    SENT = "sent"


STATUS_PENDING = Status.PENDING
STATUS_SENT = Status.SENT

# --- the state record's attributes (processed_events) and what each UpdateItem touches ----------------

#: The table's key.
EVENT_ID_ATTRIBUTE = "event_id"
#: :data:`STATUS_PENDING` or :data:`STATUS_SENT` (a reserved word in expressions: always a placeholder).
STATUS_ATTRIBUTE = "status"
#: The fingerprint of the order's content; every update is conditional on it or on the status.
PAYLOAD_SHA256_ATTRIBUTE = "payload_sha256"
#: When SNS accepted the notification (epoch seconds), set by the sent mark.
SENT_AT_ATTRIBUTE = "sent_at"
#: The table's TTL attribute (a reserved word too): set by the sent mark, never on a pending record.
TTL_ATTRIBUTE = "ttl"

# Every attribute an UpdateItem or a PartiQL UPDATE names (its key, its update and its condition), per
# call: the construct allows the functions' UpdateItem and PartiQLUpdate on exactly these
# (``dynamodb:Attributes``), and tests/infra/test_write_permissions.py checks every update the consumer
# and the reconciler make against the synthesized policies. A new attribute in an expression or a
# statement goes here first.
#: The sent mark (``OrderStore.mark_sent_batch``'s PartiQL UPDATE; consumer and reconciler).
MARK_SENT_ATTRIBUTES = (
    EVENT_ID_ATTRIBUTE,
    STATUS_ATTRIBUTE,
    PAYLOAD_SHA256_ATTRIBUTE,
    SENT_AT_ATTRIBUTE,
    TTL_ATTRIBUTE,
)
#: A pending record of an earlier version put into the pending index, as created now
#: (``OrderStore.adopt_pending``; consumer).
ADOPT_PENDING_ATTRIBUTES = (
    EVENT_ID_ATTRIBUTE,
    STATUS_ATTRIBUTE,
    PAYLOAD_SHA256_ATTRIBUTE,
    TTL_ATTRIBUTE,
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SINCE_ATTRIBUTE,
)
#: A sent record without a ``ttl`` given one (``OrderStore.expire_sent``; reconciler).
EXPIRE_SENT_ATTRIBUTES = (EVENT_ID_ATTRIBUTE, STATUS_ATTRIBUTE, TTL_ATTRIBUTE)
#: The keys of the table and of the pending index: the IAM guide asks a ``dynamodb:Attributes``
#: condition to name every primary key and index key attribute, and the adoption adds index entries.
KEY_ATTRIBUTES = (EVENT_ID_ATTRIBUTE, PENDING_SHARD_ATTRIBUTE, PENDING_SINCE_ATTRIBUTE)


def updated_attributes(*calls: tuple[str, ...]) -> tuple[str, ...]:
    """What a role whose updates are ``calls`` may name: their attributes and the key attributes, once each."""
    return tuple(dict.fromkeys(name for call in (*calls, KEY_ATTRIBUTES) for name in call))


#: The sent marks' PartiQL UPDATEs (``dynamodb:PartiQLUpdate``; the consumer and the reconciler).
MARK_STATEMENT_ATTRIBUTES = updated_attributes(MARK_SENT_ATTRIBUTES)
#: The consumer's UpdateItems: the adoption of an earlier version's pending record.
CONSUMER_UPDATE_ATTRIBUTES = updated_attributes(ADOPT_PENDING_ATTRIBUTES)
#: The reconciler's UpdateItems: a ``ttl`` for a sent record without one.
RECONCILER_UPDATE_ATTRIBUTES = updated_attributes(EXPIRE_SENT_ATTRIBUTES)

# --- the functions: their entry points and environment, set by the construct ------------------------

#: The Lambda entry points (the asset's modules ``handler`` and ``reconciler``).
CONSUMER_HANDLER = "order_consumer.handler.handler"
RECONCILER_HANDLER = "order_consumer.reconciler.handler"

PROCESSED_EVENTS_TABLE_VARIABLE = "PROCESSED_EVENTS_TABLE"
ORDER_RECORDS_TABLE_VARIABLE = "ORDER_RECORDS_TABLE"
TOPIC_ARN_VARIABLE = "TOPIC_ARN"
DEAD_LETTER_QUEUE_URL_VARIABLE = "DEAD_LETTER_QUEUE_URL"
#: Seconds a ``sent`` record is kept before DynamoDB's TTL deletes it.
RECORD_TTL_SECONDS_VARIABLE = "RECORD_TTL_SECONDS"
#: How long a record is kept when nothing says otherwise: the construct's ``record_retention`` default
#: and the consumer's when the variable is absent.
DEFAULT_RECORD_RETENTION_DAYS = 30
DEFAULT_RECORD_TTL_SECONDS = DEFAULT_RECORD_RETENTION_DAYS * 24 * 3600
#: The comma-separated fields a key is derived from when a message carries none.
IDENTITY_FIELDS_VARIABLE = "IDENTITY_FIELDS"
#: The configured notification attributes: a JSON array of field paths (absent or empty: none).
NOTIFICATION_ATTRIBUTES_VARIABLE = "NOTIFICATION_ATTRIBUTES"
#: The notification body, ``thin`` or ``order`` (absent: ``thin``).
NOTIFICATION_BODY_VARIABLE = "NOTIFICATION_BODY"
#: Powertools' own variables, which the construct sets: the logs' and metrics' service, the namespace.
SERVICE_NAME_VARIABLE = "POWERTOOLS_SERVICE_NAME"
METRICS_NAMESPACE_VARIABLE = "POWERTOOLS_METRICS_NAMESPACE"
#: The AWS SDKs' service-specific endpoint variables (AWS SDKs and Tools reference guide, "Service-specific
#: endpoints"; botocore reads them when a client is made without ``endpoint_url``): with
#: ``create_vpc_endpoints`` and private DNS off, the construct points them at its interface endpoints.
ENDPOINT_URL_VARIABLE_PREFIX = "AWS_ENDPOINT_URL_"
SNS_ENDPOINT_URL_VARIABLE = f"{ENDPOINT_URL_VARIABLE_PREFIX}SNS"
SQS_ENDPOINT_URL_VARIABLE = f"{ENDPOINT_URL_VARIABLE_PREFIX}SQS"
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
