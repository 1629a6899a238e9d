"""``powertools``: Powertools' ``BatchProcessor`` + ``@idempotent_function`` (DynamoDB persistence).

The shape Powertools' documentation gives for SQS batches ("Batch processing" -> "Integrating with
Idempotency"): ``BatchProcessor(event_type=EventType.SQS)``, a record handler decorated with
``@idempotent_function(data_keyword_argument="record", ...)`` keyed on ``messageId``,
``config.register_lambda_context(context)`` and ``process_partial_response``. Records run one after
the other (the synchronous ``BatchProcessor``).

Per new record: PutItem of the ``INPROGRESS`` idempotency record (conditional, ``ALL_OLD`` on
failure), the business step (a conditional PutItem of the order row, ``attribute_not_exists(order_id)``,
then Publish), UpdateItem of the record to ``COMPLETED`` with the handler's return value. A
redelivery is one conditional PutItem that fails and returns the stored record.

The documentation builds the persistence layer at module level, which creates a DynamoDB client at
import; here :func:`configure` builds it with the injected client, so the import figure compares code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from boto3.dynamodb.types import TypeSerializer
from botocore.exceptions import ClientError

processor = BatchProcessor(event_type=EventType.SQS)
config = IdempotencyConfig(event_key_jmespath="messageId")
_serializer = TypeSerializer()
_record_handler: Callable[..., Any] | None = None


def configure(*, dynamodb: Any, sns: Any, env: Mapping[str, str]) -> None:
    """Inject the clients; ``env``: ``IDEMPOTENCY_TABLE`` (key ``id``), ``ORDER_RECORDS_TABLE``, ``TOPIC_ARN``."""
    global _record_handler
    persistence = DynamoDBPersistenceLayer(table_name=env["IDEMPOTENCY_TABLE"], boto3_client=dynamodb)
    orders_table, topic_arn = env["ORDER_RECORDS_TABLE"], env["TOPIC_ARN"]

    @idempotent_function(data_keyword_argument="record", config=config, persistence_store=persistence)  # type: ignore[untyped-decorator, unused-ignore]
    def record_handler(record: SQSRecord) -> dict[str, Any]:
        order = json.loads(record.body, parse_float=Decimal)
        try:
            dynamodb.put_item(
                TableName=orders_table,
                Item={k: _serializer.serialize(v) for k, v in order.items()},
                ConditionExpression="attribute_not_exists(order_id)",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return {"order_id": order["order_id"], "duplicate": True}
        sns.publish(TopicArn=topic_arn, Message=json.dumps({"order_id": order["order_id"]}))
        return {"order_id": order["order_id"], "duplicate": False}

    _record_handler = record_handler


def _handle_record(record: SQSRecord) -> dict[str, Any]:
    assert _record_handler is not None, "call configure() first"
    result: dict[str, Any] = _record_handler(record=record)
    return result


def handler(event: dict[str, Any], context: Any) -> Any:
    config.register_lambda_context(context)
    return process_partial_response(event=event, record_handler=_handle_record, processor=processor, context=context)
