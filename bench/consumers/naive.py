"""``naive``: put the order, publish, no idempotency. The floor for latency and cost.

What a first version of such a consumer usually looks like: one loop over the records, an order
row inserted under a generated row id (an INSERT with a surrogate key), a notification. Every
redelivery inserts the order again and notifies again: the bench counts those duplicate rows.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeSerializer

_serializer = TypeSerializer()
_clients: dict[str, Any] = {}
_env: dict[str, str] = {}


def configure(*, dynamodb: Any, sns: Any, env: Mapping[str, str]) -> None:
    """Inject the clients; ``env``: ``ORDERS_TABLE`` (key ``row_id``), ``TOPIC_ARN``."""
    _clients.update(dynamodb=dynamodb, sns=sns)
    _env.update(env)


def handler(event: Mapping[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    for record in event["Records"]:
        order = json.loads(record["body"], parse_float=Decimal)
        item = {"row_id": str(uuid.uuid4()), **order}
        _clients["dynamodb"].put_item(
            TableName=_env["ORDERS_TABLE"], Item={k: _serializer.serialize(v) for k, v in item.items()}
        )
        _clients["sns"].publish(TopicArn=_env["TOPIC_ARN"], Message=json.dumps({"order_id": order["order_id"]}))
    return {"batchItemFailures": []}
