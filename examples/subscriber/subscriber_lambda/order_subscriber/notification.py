"""The pipeline's notification, read from an SQS record of a queue subscribed to the topic."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class NotANotification(ValueError):
    """The record is not one of the pipeline's notifications (it can never be processed)."""


@dataclass(frozen=True)
class OrderNotification:
    """``{"event_id", "order_id", "payload_sha256"}``: the same for every copy of one event."""

    event_id: str
    order_id: str
    payload_sha256: str


def parse(record: Mapping[str, Any]) -> OrderNotification:
    """The notification in an SQS record, with or without SNS raw message delivery.

    The ``event_id`` message attribute is the deduplication key (SNS puts it in the envelope's
    ``MessageAttributes``; with raw delivery it is an SQS message attribute); it must agree with
    the body's.
    """
    try:
        body = json.loads(record["body"])
        if isinstance(body, dict) and body.get("Type") == "Notification":  # the SNS envelope
            attribute = body.get("MessageAttributes", {}).get("event_id", {}).get("Value")
            message = json.loads(body["Message"])
        else:  # raw message delivery
            attribute = record.get("messageAttributes", {}).get("event_id", {}).get("stringValue")
            message = body
        notification = OrderNotification(
            event_id=str(message["event_id"]),
            order_id=str(message["order_id"]),
            payload_sha256=str(message["payload_sha256"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise NotANotification(f"not an order notification: {exc}") from exc
    if attribute is not None and attribute != notification.event_id:
        raise NotANotification("the event_id attribute and the body's event_id differ")
    return notification
