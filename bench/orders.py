"""The work: generated orders, and the SQS events that deliver them (first time and again).

Every consumer gets the same orders. A body is a realistic order of about 400 bytes (a few line items,
an address, money as JSON numbers) with its ``event_id``, so every order row stays under 1 KB: one
write request unit per plain write, two per transactional one.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from typing import Any

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:orders"
_SKUS = [f"SKU-{n:05d}" for n in range(1, 400)]
_COUNTRIES = ["DE", "FR", "NL", "IE", "ES", "IT", "PL", "SE"]


class OrderSource:
    """Deterministic orders (same seed, same orders) with unique ids across the whole run."""

    def __init__(self, seed: int = 7) -> None:
        self._random = random.Random(seed)  # noqa: S311 - test data, not security
        self._number = 0

    def order(self) -> dict[str, Any]:
        rng = self._random
        self._number += 1
        quantities_and_prices = [(rng.randint(1, 5), round(rng.uniform(2, 200), 2)) for _ in range(rng.randint(1, 4))]
        lines = [
            {"sku": rng.choice(_SKUS), "quantity": quantity, "unit_price": price}
            for quantity, price in quantities_and_prices
        ]
        total = round(sum(quantity * price for quantity, price in quantities_and_prices), 2)
        return {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "order_id": f"ord-{self._number:08d}",
            "customer_id": f"cust-{rng.randint(1, 50_000):06d}",
            "created_at": f"2026-11-30T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z",
            "currency": "EUR",
            "total": total,
            "lines": lines,
            "shipping": {"country": rng.choice(_COUNTRIES), "postcode": f"{rng.randint(10000, 99999)}"},
        }

    def orders(self, count: int) -> Iterator[dict[str, Any]]:
        for _ in range(count):
            yield self.order()


def sqs_record(order: dict[str, Any], message_id: str, receive_count: int = 1) -> dict[str, Any]:
    """One record of the Lambda SQS event, as the event source mapping delivers it."""
    body = json.dumps(order, separators=(",", ":"))
    return {
        "messageId": message_id,
        "receiptHandle": f"handle-{message_id}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": "1796025600000",
            "SenderId": "AIDAEXAMPLE",
            "ApproximateFirstReceiveTimestamp": "1796025600001",
        },
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def batch_event(orders: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    """A first delivery of these orders, one SQS message each."""
    return {"Records": [sqs_record(order, str(uuid.UUID(int=rng.getrandbits(128), version=4))) for order in orders]}


def redelivery(event: dict[str, Any]) -> dict[str, Any]:
    """The same messages delivered again (same message ids and bodies, receive count 2)."""
    records = []
    for record in event["Records"]:
        again = dict(record)
        again["attributes"] = {**record["attributes"], "ApproximateReceiveCount": "2"}
        records.append(again)
    return {"Records": records}
