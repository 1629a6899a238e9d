"""``seed``: the seed article's algorithm as written, holes included (issue 3 lists them).

Per record, one after the other:

1. ``TransactWriteItems``: put the ``pending`` state record (``attribute_not_exists(event_id)``) and
   the order row (``attribute_not_exists(order_id)``);
2. on ``TransactionCanceledException`` (whatever the reason: the seed's first hole) read the state
   record back with ``GetItem`` (eventually consistent: its second hole); ``sent`` -> skip (pattern
   B), ``pending`` -> go on to publish (pattern A);
3. ``Publish`` the notification, then ``UpdateItem`` the record to ``sent``.

The key is the body's ``event_id``, else the SHA-256 of the identity fields joined with ``|``.
No partial batch response: an error fails the whole batch.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeSerializer
from botocore.exceptions import ClientError

IDENTITY_FIELDS = ("order_id",)
TTL_SECONDS = 30 * 24 * 3600

_serializer = TypeSerializer()
_clients: dict[str, Any] = {}
_env: dict[str, str] = {}


def configure(*, dynamodb: Any, sns: Any, env: Mapping[str, str]) -> None:
    """Inject the clients; ``env``: ``PROCESSED_EVENTS_TABLE``, ``ORDER_RECORDS_TABLE``, ``TOPIC_ARN``."""
    _clients.update(dynamodb=dynamodb, sns=sns)
    _env.update(env)


def _event_id(order: Mapping[str, Any]) -> str:
    if order.get("event_id"):
        return str(order["event_id"])
    joined = "|".join(str(order[name]) for name in IDENTITY_FIELDS)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


def _process(record: Mapping[str, Any]) -> None:
    ddb, sns = _clients["dynamodb"], _clients["sns"]
    order = json.loads(record["body"], parse_float=Decimal)
    event_id = _event_id(order)
    now = int(time.time())
    try:
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": _env["PROCESSED_EVENTS_TABLE"],
                        "Item": {
                            "event_id": {"S": event_id},
                            "status": {"S": "pending"},
                            "order_id": {"S": order["order_id"]},
                            "created_at": {"N": str(now)},
                            "ttl": {"N": str(now + TTL_SECONDS)},
                        },
                        "ConditionExpression": "attribute_not_exists(event_id)",
                    }
                },
                {
                    "Put": {
                        "TableName": _env["ORDER_RECORDS_TABLE"],
                        "Item": {k: _serializer.serialize(v) for k, v in {**order, "event_id": event_id}.items()},
                        "ConditionExpression": "attribute_not_exists(order_id)",
                    }
                },
            ]
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "TransactionCanceledException":
            raise
        existing = ddb.get_item(TableName=_env["PROCESSED_EVENTS_TABLE"], Key={"event_id": {"S": event_id}}).get("Item")
        if existing and existing["status"]["S"] == "sent":
            return  # already processed and notified
    sns.publish(
        TopicArn=_env["TOPIC_ARN"],
        Message=json.dumps({"event_id": event_id, "order_id": order["order_id"]}),
    )
    ddb.update_item(
        TableName=_env["PROCESSED_EVENTS_TABLE"],
        Key={"event_id": {"S": event_id}},
        UpdateExpression="SET #status = :sent, sent_at = :now",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={":sent": {"S": "sent"}, ":now": {"N": str(int(time.time()))}},
    )


def handler(event: Mapping[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    for record in event["Records"]:
        _process(record)
    return {"batchItemFailures": []}
