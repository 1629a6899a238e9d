"""Worked example (a): a counter incremented exactly once per order (handler ``shipping.handler``).

The effect is a write to the team's own table, returned to the helper, which commits it in one
transaction with the event's ``done`` mark: a crash anywhere leaves both or neither, so however
many copies arrive, ``shipments`` ends at 1 per order. ``idempotent_subscriber`` comes from the
construct's layer.
"""

from __future__ import annotations

import os
from typing import Any

from idempotent_subscriber import Claim, OrderNotification, once_per_event


@once_per_event
def handler(notification: OrderNotification, claim: Claim) -> list[dict[str, Any]]:
    return [
        {
            "Update": {
                "TableName": os.environ["COUNTERS_TABLE"],
                "Key": {"order_id": {"S": notification.order_id}},
                "UpdateExpression": "ADD shipments :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }
    ]
